import { describe, expect, test } from "bun:test";
import { base64DecodedBytes, TaskRequest, taskRequest } from "./task-types.ts";
import { fieldErrors } from "./zod-issues.ts";

const valid = {
  recaptcha_v2: {
    sitekey: "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-",
    pageurl: "https://example.com/a",
    invisible: true,
  },
  recaptcha_v3: {
    sitekey: "6LfB5_IbAAAAAMCtsjEHEHKqcB9iQocwwxTiihJu",
    pageurl: "https://example.com/b",
    action: "login",
    min_score: 0.3,
  },
  turnstile: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/c", cdata: "x" },
  geetest: {
    gt: "81388ea1fc187e0c335c0a8907ff2625",
    challenge: "2e2f0f65240058b683cb6ea21c303eea",
    pageurl: "https://example.com/d",
  },
  image: { body: Buffer.from("png-bytes").toString("base64"), numeric: 1 },
} as const;

describe("task request schema", () => {
  for (const [type, params] of Object.entries(valid)) {
    test(`accepts a ${type} task and defaults priority to normal`, () => {
      const r = TaskRequest.parse({ type, params });
      expect(r.type).toBe(type as never);
      expect(r.priority).toBe("normal");
    });
  }
  test("an unknown type names the field `type`", () => {
    const r = TaskRequest.safeParse({ type: "hcaptcha", params: {} });
    expect(r.success).toBe(false);
    expect(fieldErrors(r.error!).map((e) => e.field)).toContain("type");
  });
  test("a missing sitekey is named with its path", () => {
    const r = TaskRequest.safeParse({ type: "turnstile", params: { pageurl: "https://e.com" } });
    expect(fieldErrors(r.error!)).toEqual([{ field: "params.sitekey", message: expect.any(String) }]);
  });
  test("unknown params are rejected, not ignored", () => {
    const r = TaskRequest.safeParse({ type: "turnstile", params: { ...valid.turnstile, surprise: 1 } });
    expect(r.success).toBe(false);
  });
  test("pageurl must be http(s)", () => {
    const r = TaskRequest.safeParse({
      type: "turnstile",
      params: { ...valid.turnstile, pageurl: "javascript:alert(1)" },
    });
    expect(fieldErrors(r.error!)[0]!.field).toBe("params.pageurl");
  });
  test("the image cap is a setting", () => {
    const body = Buffer.alloc(2000, 7).toString("base64");
    expect(base64DecodedBytes(body)).toBe(2000);
    expect(taskRequest({ imageMaxBytes: 2000 }).safeParse({ type: "image", params: { body } }).success).toBe(true);
    const r = taskRequest({ imageMaxBytes: 1999 }).safeParse({ type: "image", params: { body } });
    expect(fieldErrors(r.error!)[0]!.field).toBe("params.body");
  });
  test("priority is one of the lanes", () => {
    expect(TaskRequest.safeParse({ type: "turnstile", params: valid.turnstile, priority: "urgent" }).success).toBe(
      false,
    );
    expect(TaskRequest.parse({ type: "turnstile", params: valid.turnstile, priority: "high" }).priority).toBe("high");
  });
});

describe("callbackUrl", () => {
  const task = (callbackUrl: unknown) => ({ type: "turnstile", params: valid.turnstile, callbackUrl });
  test("a private or plain-http callbackUrl is refused by default, naming the field", () => {
    for (const url of [
      "http://hooks.example.com/cb",
      "https://127.0.0.1/cb",
      "https://0x7f000001/cb",
      "https://[::1]/cb",
      "https://10.0.0.1/cb",
      "https://u:p@hooks.example.com/cb",
    ]) {
      const r = TaskRequest.safeParse(task(url));
      expect(r.success).toBe(false);
      expect(fieldErrors(r.error!)).toEqual([{ field: "callbackUrl", message: expect.any(String) }]);
    }
  });
  test("a public https callbackUrl is kept as sent", () => {
    expect(TaskRequest.parse(task("https://Hooks.Example.com/cb?x=1")).callbackUrl).toBe(
      "https://Hooks.Example.com/cb?x=1",
    );
  });
  test("the dev policy lets http://127.0.0.1 through", () => {
    expect(
      taskRequest({ callbacks: { allowHttp: true, allowPrivate: true } }).safeParse(task("http://127.0.0.1:9/hook"))
        .success,
    ).toBe(true);
  });
});
