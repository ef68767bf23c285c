import { afterEach, describe, expect, test } from "bun:test";
import { type Harness, PNG_1X1, startEmulator } from "./testing/emulator-harness.ts";

const open: Harness[] = [];
async function emu(opts: Parameters<typeof startEmulator>[0] = {}): Promise<Harness> {
  const h = await startEmulator(opts);
  open.push(h);
  return h;
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((h) => h.stop()));
});

const KEY = "test-key";
const RECAPTCHA = { key: KEY, method: "userrecaptcha", googlekey: "6LcTest", pageurl: "https://example.test/login" };

describe("in.php accepts each method", () => {
  test("reCAPTCHA v2 over GET answers plain OK|<numeric id> as text/plain", async () => {
    const h = await emu();
    const r = await h.get("/in.php", RECAPTCHA);
    expect(r.status).toBe(200);
    expect(r.body).toMatch(/^OK\|\d+$/);
    expect(r.contentType).toStartWith("text/plain");
    expect(h.emulator.task(r.body.slice(3))?.method).toBe("userrecaptcha");
  });

  test('json=1 answers exactly {"status":1,"request":"<id>"} as application/json', async () => {
    const h = await emu();
    const r = await h.get("/in.php", { ...RECAPTCHA, json: "1" });
    const id = (JSON.parse(r.body) as { request: string }).request;
    expect(id).toMatch(/^\d+$/);
    expect(r.body).toBe(`{"status":1,"request":"${id}"}`);
    expect(r.contentType).toBe("application/json");
  });

  test("POST urlencoded and POST JSON bodies are accepted", async () => {
    const h = await emu();
    expect((await h.post("/in.php", new URLSearchParams(RECAPTCHA))).body).toMatch(/^OK\|\d+$/);
    expect((await h.post("/in.php", { ...RECAPTCHA, json: 1 })).body).toMatch(/^\{"status":1,"request":"\d+"\}$/);
  });

  test("version=v3 makes a v3 task; a min_score outside 0..1 is ERROR_BAD_PARAMETERS", async () => {
    const h = await emu();
    const id = await h.submit({ ...RECAPTCHA, version: "v3", action: "login", min_score: "0.3" });
    expect(h.emulator.task(id)?.method).toBe("userrecaptcha_v3");
    expect((await h.get("/in.php", { ...RECAPTCHA, version: "v3", min_score: "high" })).body).toBe(
      "ERROR_BAD_PARAMETERS",
    );
  });

  test("turnstile and geetest are accepted", async () => {
    const h = await emu();
    const t = await h.submit({ key: KEY, method: "turnstile", sitekey: "0x4AAA", pageurl: "https://example.test" });
    const g = await h.submit({
      key: KEY,
      method: "geetest",
      gt: "gt1",
      challenge: "ch1",
      pageurl: "https://example.test",
    });
    expect(h.emulator.task(t)?.method).toBe("turnstile");
    expect(h.emulator.task(g)?.method).toBe("geetest");
  });

  test("an image as multipart file (method=post) and as base64 body are accepted", async () => {
    const h = await emu();
    const form = new FormData();
    form.append("key", KEY);
    form.append("method", "post");
    form.append("file", new Blob([PNG_1X1], { type: "image/png" }), "captcha.png");
    const viaFile = await h.post("/in.php", form);
    expect(viaFile.body).toMatch(/^OK\|\d+$/);
    const viaBase64 = await h.post(
      "/in.php",
      new URLSearchParams({ key: KEY, method: "base64", body: PNG_1X1.toString("base64") }),
    );
    expect(viaBase64.body).toMatch(/^OK\|\d+$/);
    expect(h.emulator.task(viaFile.body.slice(3))?.method).toBe("image");
  });

  test("ids are unique numeric strings", async () => {
    const h = await emu({ keys: { [KEY]: { threads: 100 } } });
    const ids = await Promise.all(Array.from({ length: 40 }, () => h.submit(RECAPTCHA)));
    expect(new Set(ids).size).toBe(40);
    for (const id of ids) expect(id).toMatch(/^\d+$/);
  });

  test("header_acao=1 adds Access-Control-Allow-Origin: *; without it there is none", async () => {
    const h = await emu();
    expect(
      (await h.get("/in.php", { ...RECAPTCHA, header_acao: "1" })).headers.get("access-control-allow-origin"),
    ).toBe("*");
    expect((await h.get("/in.php", RECAPTCHA)).headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("in.php refuses bad submissions with the documented code", () => {
  const cases: Array<[string, Record<string, string>, string]> = [
    ["missing googlekey", { key: KEY, method: "userrecaptcha", pageurl: "https://x.test" }, "ERROR_GOOGLEKEY"],
    ["missing pageurl (recaptcha)", { key: KEY, method: "userrecaptcha", googlekey: "g" }, "ERROR_PAGEURL"],
    ["missing sitekey", { key: KEY, method: "turnstile", pageurl: "https://x.test" }, "ERROR_GOOGLEKEY"],
    ["missing pageurl (turnstile)", { key: KEY, method: "turnstile", sitekey: "s" }, "ERROR_PAGEURL"],
    ["missing gt", { key: KEY, method: "geetest", challenge: "c", pageurl: "https://x.test" }, "ERROR_BAD_PARAMETERS"],
    ["missing challenge", { key: KEY, method: "geetest", gt: "g", pageurl: "https://x.test" }, "ERROR_BAD_PARAMETERS"],
    ["missing pageurl (geetest)", { key: KEY, method: "geetest", gt: "g", challenge: "c" }, "ERROR_PAGEURL"],
    ["empty base64 body", { key: KEY, method: "base64", body: "" }, "ERROR_ZERO_CAPTCHA_FILESIZE"],
    ["post without a file", { key: KEY, method: "post" }, "ERROR_ZERO_CAPTCHA_FILESIZE"],
    ["unknown method", { key: KEY, method: "hcaptcha_v9", pageurl: "https://x.test" }, "ERROR_BAD_PARAMETERS"],
    ["no method", { key: KEY, pageurl: "https://x.test" }, "ERROR_BAD_PARAMETERS"],
    ["unknown key", { ...RECAPTCHA, key: "not-a-key" }, "ERROR_WRONG_USER_KEY"],
    ["empty key", { ...RECAPTCHA, key: "" }, "ERROR_KEY_DOES_NOT_EXIST"],
  ];
  for (const [name, params, code] of cases) {
    test(`${name} -> ${code} (plain and json)`, async () => {
      const h = await emu();
      const plain = await h.get("/in.php", params);
      expect(plain.status).toBe(200);
      expect(plain.body).toBe(code);
      expect((await h.get("/in.php", { ...params, json: "1" })).body).toBe(`{"status":0,"request":"${code}"}`);
      expect(h.emulator.stats()).toMatchObject({ submissions: 0, rejectedSubmissions: 2 });
    });
  }

  test("a missing key parameter is ERROR_KEY_DOES_NOT_EXIST", async () => {
    const h = await emu();
    const { key: _key, ...noKey } = RECAPTCHA;
    expect((await h.get("/in.php", noKey)).body).toBe("ERROR_KEY_DOES_NOT_EXIST");
  });

  test("an image over the cap (default 100 kB decoded) is ERROR_TOO_BIG_CAPTCHA_FILESIZE; exactly the cap is accepted", async () => {
    const h = await emu();
    const atCap = Buffer.alloc(100 * 1024, 7);
    const over = Buffer.alloc(100 * 1024 + 1, 7);
    const post = (b: Buffer) =>
      h.post("/in.php", new URLSearchParams({ key: KEY, method: "base64", body: b.toString("base64") }));
    expect((await post(atCap)).body).toMatch(/^OK\|\d+$/);
    expect((await post(over)).body).toBe("ERROR_TOO_BIG_CAPTCHA_FILESIZE");
    const form = new FormData();
    form.append("key", KEY);
    form.append("method", "post");
    form.append("file", new Blob([over]), "big.png");
    expect((await h.post("/in.php", form)).body).toBe("ERROR_TOO_BIG_CAPTCHA_FILESIZE");
  });

  test("the image cap is configurable", async () => {
    const h = await emu({ maxImageBytes: 10 });
    const body = Buffer.alloc(11, 1).toString("base64");
    expect((await h.post("/in.php", new URLSearchParams({ key: KEY, method: "base64", body }))).body).toBe(
      "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
    );
  });

  test("a base64 body that is not base64 is ERROR_UPLOAD", async () => {
    const h = await emu();
    expect(
      (await h.post("/in.php", new URLSearchParams({ key: KEY, method: "base64", body: "%%%not base64!" }))).body,
    ).toBe("ERROR_UPLOAD");
  });
});

describe("thread limit and balance", () => {
  test("submitting over the key's thread limit answers ERROR_NO_SLOT_AVAILABLE; reading an answer frees a slot", async () => {
    const h = await emu({ keys: { [KEY]: { threads: 2 }, other: { threads: 1 } }, latencyMs: 30 });
    const first = await h.submit(RECAPTCHA);
    await h.submit(RECAPTCHA);
    expect((await h.get("/in.php", RECAPTCHA)).body).toBe("ERROR_NO_SLOT_AVAILABLE");
    expect((await h.get("/in.php", { ...RECAPTCHA, key: "other" })).body).toMatch(/^OK\|/); // limits are per key
    await Bun.sleep(40);
    expect((await h.get("/in.php", RECAPTCHA)).body).toBe("ERROR_NO_SLOT_AVAILABLE"); // ready but unread still holds the slot
    expect((await h.get("/res.php", { key: KEY, action: "get", id: first })).body).toStartWith("OK|");
    expect((await h.get("/in.php", RECAPTCHA)).body).toMatch(/^OK\|\d+$/);
    expect(h.emulator.stats().maxInFlightByKey).toEqual({ [KEY]: 2, other: 1 });
  });

  test("an unread task gives its slot back 30 s after it was ready", async () => {
    let now = 1_000_000;
    const h = await emu({ keys: { [KEY]: { threads: 1 } }, latencyMs: 5_000, now: () => now });
    await h.submit(RECAPTCHA);
    now += 5_000 + 29_999;
    expect((await h.get("/in.php", RECAPTCHA)).body).toBe("ERROR_NO_SLOT_AVAILABLE");
    now += 1;
    expect((await h.get("/in.php", RECAPTCHA)).body).toMatch(/^OK\|\d+$/);
  });

  test("a key whose balance cannot pay the task gets ERROR_ZERO_BALANCE", async () => {
    const h = await emu({ keys: { [KEY]: { threads: 5, balance: 0.002 } } });
    expect((await h.get("/in.php", RECAPTCHA)).body).toBe("ERROR_ZERO_BALANCE"); // 0.00299 needed
    expect(
      (await h.post("/in.php", new URLSearchParams({ key: KEY, method: "base64", body: PNG_1X1.toString("base64") })))
        .body,
    ).toMatch(/^OK\|/); // an image costs 0.001
  });
});
