import { afterEach, describe, expect, test } from "bun:test";
import { TURNSTILE_USER_AGENT } from "./answers.ts";
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
const TURNSTILE = { key: KEY, method: "turnstile", sitekey: "0x4AAA", pageurl: "https://example.test" };
const get = (id: string, extra: Record<string, string> = {}) => ({ key: KEY, action: "get", id, ...extra });

describe("res.php get", () => {
  test("answers CAPCHA_NOT_READY until the latency has passed, then OK|<token issued for that id>", async () => {
    let now = 1_000_000;
    const h = await emu({ latencyMs: 40, now: () => now });
    const id = await h.submit(RECAPTCHA);
    now += 39;
    const early = await h.get("/res.php", get(id));
    expect(early.body).toBe("CAPCHA_NOT_READY");
    expect(early.contentType).toStartWith("text/plain");
    expect((await h.get("/res.php", get(id, { json: "1" }))).body).toBe('{"status":0,"request":"CAPCHA_NOT_READY"}');
    now += 1;
    const token = h.emulator.task(id)!.answer!;
    expect(token).toMatch(new RegExp(`^03AGdBq2-EMU-TOKEN-${id}-[A-Za-z0-9_-]+$`));
    expect((await h.get("/res.php", get(id))).body).toBe(`OK|${token}`);
    const json = await h.get("/res.php", get(id, { json: "1" }));
    expect(json.body).toBe(`{"status":1,"request":"${token}"}`);
    expect(json.contentType).toBe("application/json");
  });

  test("with the real clock, a 30 ms task is ready 40 ms later", async () => {
    const h = await emu({ latencyMs: 30 });
    const id = await h.submit(RECAPTCHA);
    await Bun.sleep(40);
    expect((await h.get("/res.php", get(id))).body).toBe(`OK|${h.emulator.task(id)!.answer}`);
  });

  test("latency can differ per method, and jitter stays within its bound", async () => {
    const h = await emu({ latencyMs: { turnstile: 0, userrecaptcha: 10_000 }, latencyJitterMs: 20 });
    const t = await h.submit(TURNSTILE);
    const r = await h.submit(RECAPTCHA);
    const tt = h.emulator.task(t)!;
    expect(tt.readyAt - tt.submittedAt).toBeLessThanOrEqual(20);
    const rt = h.emulator.task(r)!;
    expect(rt.readyAt - rt.submittedAt).toBeGreaterThanOrEqual(10_000);
    expect((await h.get("/res.php", get(r))).body).toBe("CAPCHA_NOT_READY");
  });

  test("each task gets its own token", async () => {
    const h = await emu();
    const a = await h.submit(RECAPTCHA);
    const b = await h.submit(RECAPTCHA);
    expect((await h.get("/res.php", get(a))).body).not.toBe((await h.get("/res.php", get(b))).body);
  });

  test("turnstile: plain OK|0.EMU-TOKEN-..., json adds useragent", async () => {
    const h = await emu();
    const id = await h.submit(TURNSTILE);
    const token = h.emulator.task(id)!.answer!;
    expect(token).toStartWith(`0.EMU-TOKEN-${id}-`);
    expect((await h.get("/res.php", get(id))).body).toBe(`OK|${token}`);
    expect((await h.get("/res.php", get(id, { json: "1" }))).body).toBe(
      JSON.stringify({ status: 1, request: token, useragent: TURNSTILE_USER_AGENT }),
    );
  });

  test("geetest answers a JSON string with the challenge sent, validate and seccode", async () => {
    const h = await emu();
    const id = await h.submit({
      key: KEY,
      method: "geetest",
      gt: "gt1",
      challenge: "challenge-42",
      pageurl: "https://x.test",
    });
    const body = (await h.get("/res.php", get(id))).body;
    expect(body).toStartWith("OK|");
    const answer = JSON.parse(body.slice(3)) as Record<string, string>;
    expect(Object.keys(answer)).toEqual(["geetest_challenge", "geetest_validate", "geetest_seccode"]);
    expect(answer.geetest_challenge).toBe("challenge-42");
    expect(answer.geetest_seccode).toBe(`${answer.geetest_validate}|jordan`);
    const json = JSON.parse((await h.get("/res.php", get(id, { json: "1" }))).body) as { request: string };
    expect(json.request).toBe(body.slice(3));
  });

  test("image: a short text answer, the same for the same image; numeric=1 gives digits", async () => {
    const h = await emu();
    const body = PNG_1X1.toString("base64");
    const a = await h.submit({ key: KEY, method: "base64", body });
    const b = await h.submit({ key: KEY, method: "base64", body });
    const c = await h.submit({ key: KEY, method: "base64", body, numeric: "1" });
    const ra = (await h.get("/res.php", get(a))).body;
    expect(ra).toMatch(/^OK\|[0-9a-z]{6}$/);
    expect((await h.get("/res.php", get(b))).body).toBe(ra);
    expect((await h.get("/res.php", get(c))).body).toMatch(/^OK\|\d{6}$/);
  });

  test("bulk ids=...: answers joined with | in order; unknown ids say ERROR_WRONG_CAPTCHA_ID", async () => {
    const h = await emu({ latencyMs: { userrecaptcha: 0, turnstile: 10_000 } });
    const ready = await h.submit(RECAPTCHA);
    const pending = await h.submit(TURNSTILE);
    const token = h.emulator.task(ready)!.answer!;
    const ids = `${ready},${pending},1`;
    expect((await h.get("/res.php", { key: KEY, action: "get", ids })).body).toBe(
      `${token}|CAPCHA_NOT_READY|ERROR_WRONG_CAPTCHA_ID`,
    );
    expect((await h.get("/res.php", { key: KEY, action: "get", ids, json: "1" })).body).toBe(
      `{"status":1,"request":"${token}|CAPCHA_NOT_READY|ERROR_WRONG_CAPTCHA_ID"}`,
    );
    expect((await h.get("/res.php", { key: KEY, action: "get", ids: `${ready},abc` })).body).toBe(
      "ERROR_WRONG_ID_FORMAT",
    );
  });

  test("get2 answers the answer and the price", async () => {
    const h = await emu();
    const id = await h.submit(RECAPTCHA);
    const token = h.emulator.task(id)!.answer!;
    expect((await h.get("/res.php", { key: KEY, action: "get2", id })).body).toBe(`OK|${token}|0.00299`);
    expect((await h.get("/res.php", { key: KEY, action: "get2", id, json: "1" })).body).toBe(
      `{"status":1,"request":"${token}","price":"0.00299"}`,
    );
  });

  test("bad id format -> ERROR_WRONG_ID_FORMAT; unknown or another key's id -> ERROR_WRONG_CAPTCHA_ID", async () => {
    const h = await emu({ keys: { [KEY]: { threads: 5 }, other: { threads: 5 } } });
    const id = await h.submit(RECAPTCHA);
    expect((await h.get("/res.php", get("12ab"))).body).toBe("ERROR_WRONG_ID_FORMAT");
    expect((await h.get("/res.php", { key: KEY, action: "get" })).body).toBe("ERROR_WRONG_ID_FORMAT");
    expect((await h.get("/res.php", get("123"))).body).toBe("ERROR_WRONG_CAPTCHA_ID");
    expect((await h.get("/res.php", get("123", { json: "1" }))).body).toBe(
      '{"status":0,"request":"ERROR_WRONG_CAPTCHA_ID"}',
    );
    expect((await h.get("/res.php", { key: "other", action: "get", id })).body).toBe("ERROR_WRONG_CAPTCHA_ID");
  });

  test("res.php accepts POST (urlencoded and JSON)", async () => {
    const h = await emu();
    const id = await h.submit(RECAPTCHA);
    const token = h.emulator.task(id)!.answer!;
    expect((await h.post("/res.php", new URLSearchParams(get(id)))).body).toBe(`OK|${token}`);
    expect((await h.post("/res.php", { ...get(id), json: 1 })).body).toBe(`{"status":1,"request":"${token}"}`);
  });
});

describe("res.php other actions", () => {
  test("getbalance answers the balance as a number, charged per solved answer read", async () => {
    const h = await emu({ keys: { [KEY]: { threads: 5, balance: 12.345 } } });
    expect((await h.get("/res.php", { key: KEY, action: "getbalance" })).body).toBe("12.345");
    expect((await h.get("/res.php", { key: KEY, action: "getbalance", json: "1" })).body).toBe(
      '{"status":1,"request":"12.345"}',
    );
    const id = await h.submit(RECAPTCHA);
    await h.get("/res.php", get(id));
    await h.get("/res.php", get(id)); // a second read is not charged again
    expect((await h.get("/res.php", { key: KEY, action: "getbalance" })).body).toBe("12.34201");
  });

  test("reportbad/reportgood -> OK_REPORT_RECORDED, then ERROR_DUPLICATE_REPORT; unknown id -> ERROR_WRONG_CAPTCHA_ID", async () => {
    const h = await emu();
    const a = await h.submit(RECAPTCHA);
    const b = await h.submit(RECAPTCHA);
    expect((await h.get("/res.php", { key: KEY, action: "reportbad", id: a })).body).toBe("OK_REPORT_RECORDED");
    expect((await h.get("/res.php", { key: KEY, action: "reportgood", id: a })).body).toBe("ERROR_DUPLICATE_REPORT");
    expect((await h.get("/res.php", { key: KEY, action: "reportgood", id: b, json: "1" })).body).toBe(
      '{"status":1,"request":"OK_REPORT_RECORDED"}',
    );
    expect((await h.get("/res.php", { key: KEY, action: "reportbad", id: b, json: "1" })).body).toBe(
      '{"status":0,"request":"ERROR_DUPLICATE_REPORT"}',
    );
    expect((await h.get("/res.php", { key: KEY, action: "reportbad", id: "999" })).body).toBe("ERROR_WRONG_CAPTCHA_ID");
    expect((await h.get("/res.php", { key: KEY, action: "reportbad", id: "x" })).body).toBe("ERROR_WRONG_ID_FORMAT");
    expect(h.emulator.task(a)?.report).toBe("bad");
    expect(h.emulator.stats().reports).toEqual({ bad: 1, good: 1 });
  });

  test("reportbad gives a solved task's charge back to the balance and books it; reportgood and unread tasks refund nothing", async () => {
    const h = await emu({ keys: { [KEY]: { threads: 5, balance: 10 } } });
    const a = await h.submit(RECAPTCHA);
    const b = await h.submit(TURNSTILE);
    const unread = await h.submit(RECAPTCHA);
    await h.get("/res.php", get(a));
    await h.get("/res.php", { key: KEY, action: "get2", id: b });
    expect((await h.get("/res.php", { key: KEY, action: "getbalance" })).body).toBe("9.99556");
    expect((await h.get("/res.php", { key: KEY, action: "reportbad", id: a })).body).toBe("OK_REPORT_RECORDED");
    expect((await h.get("/res.php", { key: KEY, action: "reportgood", id: b })).body).toBe("OK_REPORT_RECORDED");
    expect((await h.get("/res.php", { key: KEY, action: "reportbad", id: unread })).body).toBe("OK_REPORT_RECORDED");
    expect((await h.get("/res.php", { key: KEY, action: "getbalance" })).body).toBe("9.99855");
    expect(h.emulator.task(a)).toMatchObject({ chargedUnits: 299, refundedUnits: 299 });
    expect(h.emulator.task(unread)).toMatchObject({ chargedUnits: 0, refundedUnits: 0 });
    const books = h.emulator.books();
    expect(books.byKey[KEY]).toEqual({
      charges: 2,
      chargedUnits: 444,
      refunds: 1,
      refundedUnits: 299,
      chargedMicros: 4440,
      refundedMicros: 2990,
    });
    expect(books.totals.chargedMicros - books.totals.refundedMicros).toBe(1450);
    const viaHttp = await h.get("/emulator/books");
    expect(JSON.parse(viaHttp.body)).toEqual(books);
    h.emulator.reset();
    expect(h.emulator.books()).toEqual({
      byKey: {},
      totals: {
        ...books.totals,
        charges: 0,
        chargedUnits: 0,
        refunds: 0,
        refundedUnits: 0,
        chargedMicros: 0,
        refundedMicros: 0,
      },
    });
  });

  test("a report later than 15 minutes after the answer was read -> ERROR_REPORT_NOT_RECORDED, nothing refunded", async () => {
    let now = 1_000_000;
    const h = await emu({ now: () => now });
    const a = await h.submit(RECAPTCHA);
    await h.get("/res.php", get(a));
    now += 15 * 60_000 + 1;
    expect((await h.get("/res.php", { key: KEY, action: "reportbad", id: a })).body).toBe("ERROR_REPORT_NOT_RECORDED");
    expect(h.emulator.books().totals.refunds).toBe(0);
    expect(h.emulator.task(a)?.report).toBeNull();
  });

  test("unknown or missing action -> ERROR_EMPTY_ACTION", async () => {
    const h = await emu();
    expect((await h.get("/res.php", { key: KEY, action: "dance" })).body).toBe("ERROR_EMPTY_ACTION");
    expect((await h.get("/res.php", { key: KEY })).body).toBe("ERROR_EMPTY_ACTION");
    expect((await h.get("/res.php", { key: KEY, json: "1" })).body).toBe('{"status":0,"request":"ERROR_EMPTY_ACTION"}');
  });

  test("wrong or missing key on res.php", async () => {
    const h = await emu();
    expect((await h.get("/res.php", { key: "nope", action: "getbalance" })).body).toBe("ERROR_WRONG_USER_KEY");
    expect((await h.get("/res.php", { action: "getbalance" })).body).toBe("ERROR_KEY_DOES_NOT_EXIST");
  });
});
