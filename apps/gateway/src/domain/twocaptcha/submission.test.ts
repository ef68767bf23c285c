import { describe, expect, test } from "bun:test";
import { toProviderParams } from "@pipeline/shared/provider";
import type { TaskSpec } from "@pipeline/shared/schemas";
import { PINGBACK_NOT_SUPPORTED, PROXY_NOT_SUPPORTED, parseSubmission, submitFailureCode } from "./submission.ts";

const LIMITS = { imageMaxBytes: 1000 };
const parse = (params: Record<string, string>, file?: Uint8Array) => parseSubmission(params, file, LIMITS);
const codeOf = (params: Record<string, string>, file?: Uint8Array) => {
  const r = parse(params, file);
  return r.ok ? "accepted" : r.code;
};
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);
const V2 = {
  key: "k",
  method: "userrecaptcha",
  googlekey: "6LfD3PIbAAAAAJs_eEHvoOl75_83eXSqpPSRFJ_u",
  pageurl: "https://example.com/login",
};

describe("in.php params -> task (the reverse of toProviderParams)", () => {
  const specs: TaskSpec[] = [
    {
      type: "recaptcha_v2",
      params: {
        sitekey: "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-",
        pageurl: "https://example.com/a",
        invisible: true,
        enterprise: true,
        data_s: "ds-value",
      },
    },
    {
      type: "recaptcha_v3",
      params: {
        sitekey: "6LfB5_IbAAAAAMCtsjEHEHKqcB9iQocwwxTiihJu",
        pageurl: "https://example.com/b",
        action: "login",
        min_score: 0.3,
        enterprise: true,
      },
    },
    {
      type: "turnstile",
      params: {
        sitekey: "0x4AAAAAAAC3DHQFLr1GavRN",
        pageurl: "https://example.com/c",
        action: "signup",
        cdata: "cdata-1",
      },
    },
    {
      type: "geetest",
      params: {
        gt: "81388ea1fc187e0c335c0a8907ff2625",
        challenge: "2e2f0f65240058b683cb6ea21c303eea",
        pageurl: "https://example.com/d",
        api_server: "api-na.geetest.com",
      },
    },
    {
      type: "image",
      params: {
        body: PNG.toString("base64"),
        phrase: true,
        case_sensitive: true,
        numeric: 1,
        calc: true,
        min_len: 4,
        max_len: 6,
        language: 2,
        lang: "en",
        textinstructions: "type the red letters",
      },
    },
  ];
  for (const spec of specs) {
    test(`${spec.type}: toProviderParams then parseSubmission gives the task back`, () => {
      const form = { key: "client-key", json: "1", soft_id: "3898", header_acao: "1", ...toProviderParams(spec) };
      expect(parse(form)).toEqual({ ok: true, task: { ...spec, priority: "normal" } as never });
    });
  }

  test("a multipart file (method=post) becomes the image's base64 body, with hints", () => {
    expect(parse({ key: "k", method: "post", regsense: "1", numeric: "4" }, new Uint8Array(PNG))).toEqual({
      ok: true,
      task: {
        type: "image",
        priority: "normal",
        params: { body: PNG.toString("base64"), case_sensitive: true, numeric: 4 },
      },
    });
  });

  test("0 flags, 0 lengths and empty values count as not given", () => {
    const r = parse({ ...V2, invisible: "0", enterprise: "false", "data-s": "" });
    expect(r).toEqual({
      ok: true,
      task: { type: "recaptcha_v2", priority: "normal", params: { sitekey: V2.googlekey, pageurl: V2.pageurl } },
    });
    const img = parse({
      key: "k",
      method: "base64",
      body: PNG.toString("base64"),
      min_len: "0",
      max_len: "0",
      phrase: "0",
    });
    expect(img.ok && img.task.params).toEqual({ body: PNG.toString("base64") });
  });

  test("version=v2 is v2; line-wrapped base64 is accepted", () => {
    const v2 = parse({ ...V2, version: "v2" });
    expect(v2.ok && v2.task.type).toBe("recaptcha_v2");
    const wrapped = PNG.toString("base64").replace(/(.{20})/g, "$1\n");
    const r = parse({ key: "k", method: "base64", body: wrapped });
    expect(r.ok && r.task.params).toEqual({ body: PNG.toString("base64") });
  });

  test("params we do not know (cookies, userAgent, domain) are ignored, as providers do", () => {
    expect(codeOf({ ...V2, cookies: "a=b", userAgent: "UA", domain: "recaptcha.net" })).toBe("accepted");
  });
});

describe("refused submissions answer the provider's code", () => {
  test.each([
    ["unknown method", { ...V2, method: "hcaptcha" }, "ERROR_BAD_PARAMETERS"],
    ["no method", { key: "k", googlekey: "x", pageurl: "https://e.com" }, "ERROR_BAD_PARAMETERS"],
    ["unknown recaptcha version", { ...V2, version: "v4" }, "ERROR_BAD_PARAMETERS"],
    ["missing googlekey", { ...V2, googlekey: "" }, "ERROR_GOOGLEKEY"],
    ["malformed googlekey", { ...V2, googlekey: "has spaces in it" }, "ERROR_WRONG_GOOGLEKEY"],
    ["missing googlekey and pageurl", { key: "k", method: "userrecaptcha" }, "ERROR_GOOGLEKEY"],
    ["missing pageurl", { ...V2, pageurl: "" }, "ERROR_PAGEURL"],
    ["a pageurl that is not http(s)", { ...V2, pageurl: "javascript:alert(1)" }, "ERROR_PAGEURL"],
    ["turnstile without sitekey", { key: "k", method: "turnstile", pageurl: "https://e.com" }, "ERROR_GOOGLEKEY"],
    ["v3 min_score out of range", { ...V2, version: "v3", min_score: "1.5" }, "ERROR_BAD_PARAMETERS"],
    ["v3 min_score not a number", { ...V2, version: "v3", min_score: "high" }, "ERROR_BAD_PARAMETERS"],
    ["a flag that is not 0/1", { ...V2, invisible: "yes" }, "ERROR_BAD_PARAMETERS"],
    ["geetest without gt (and pageurl)", { key: "k", method: "geetest", challenge: "abc" }, "ERROR_BAD_PARAMETERS"],
    [
      "geetest with a malformed gt",
      { key: "k", method: "geetest", gt: "nothex", challenge: "abc", pageurl: "https://e.com" },
      "ERROR_BAD_PARAMETERS",
    ],
    [
      "geetest without pageurl",
      { key: "k", method: "geetest", gt: "81388ea1fc187e0c335c0a8907ff2625", challenge: "abc" },
      "ERROR_PAGEURL",
    ],
    ["base64 without body", { key: "k", method: "base64" }, "ERROR_ZERO_CAPTCHA_FILESIZE"],
    ["base64 that is not base64", { key: "k", method: "base64", body: "not*base64!" }, "ERROR_UPLOAD"],
    [
      "base64 over the cap",
      { key: "k", method: "base64", body: Buffer.alloc(1001, 1).toString("base64") },
      "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
    ],
    [
      "image with numeric=7",
      { key: "k", method: "base64", body: PNG.toString("base64"), numeric: "7" },
      "ERROR_BAD_PARAMETERS",
    ],
    [
      "image with a bad lang",
      { key: "k", method: "base64", body: PNG.toString("base64"), lang: "english" },
      "ERROR_BAD_PARAMETERS",
    ],
    ["pingback", { ...V2, pingback: "https://me.example.com/cb" }, PINGBACK_NOT_SUPPORTED],
    ["proxy", { ...V2, proxy: "user:pass@1.2.3.4:3128", proxytype: "HTTP" }, PROXY_NOT_SUPPORTED],
  ] as Array<[string, Record<string, string>, string]>)("%s -> %s", (_name, params, expected) => {
    expect(codeOf(params)).toBe(expected);
  });

  test("method=post: no file is ERROR_ZERO_CAPTCHA_FILESIZE, a file over the cap ERROR_TOO_BIG_CAPTCHA_FILESIZE", () => {
    expect(codeOf({ key: "k", method: "post" })).toBe("ERROR_ZERO_CAPTCHA_FILESIZE");
    expect(codeOf({ key: "k", method: "post" }, new Uint8Array(0))).toBe("ERROR_ZERO_CAPTCHA_FILESIZE");
    expect(codeOf({ key: "k", method: "post" }, new Uint8Array(1000))).toBe("accepted");
    expect(codeOf({ key: "k", method: "post" }, new Uint8Array(1001))).toBe("ERROR_TOO_BIG_CAPTCHA_FILESIZE");
  });

  test("a submission the queue did not take is ERROR_NO_SLOT_AVAILABLE (clients retry it)", () => {
    expect(submitFailureCode("queue_unavailable")).toBe("ERROR_NO_SLOT_AVAILABLE");
    expect(submitFailureCode("id_collision")).toBe("ERROR_NO_SLOT_AVAILABLE");
  });
});
