import { afterEach, describe, expect, test } from "bun:test";
import { createEmulator } from "./emulator.ts";
import { fingerprintOf } from "./fingerprint.ts";
import { EmulatorConfigError } from "./settings.ts";
import { type Harness, startEmulator } from "./testing/emulator-harness.ts";

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
const TASK = { googlekey: "6LcTest", pageurl: "https://example.test/login" };
const RECAPTCHA = { key: KEY, method: "userrecaptcha", ...TASK };

async function postConfig(h: Harness, body: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${h.url}/emulator/config`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

describe("control API", () => {
  test("GET /healthz answers ok", async () => {
    const h = await emu();
    expect(await (await fetch(`${h.url}/healthz`)).json()).toEqual({ ok: true });
  });

  test("POST /emulator/config rejects bad input with 400 naming the field, and changes nothing", async () => {
    const h = await emu();
    const cases: Array<[unknown, string[]]> = [
      [{ faults: { errorRate: 2 } }, ["faults.errorRate"]],
      [{ faults: { errorCode: "lowercase" } }, ["faults.errorCode"]],
      [{ faults: { bogus: 1 } }, ["faults.bogus"]],
      [{ latencyMs: -5 }, ["latencyMs"]],
      [{ latencyMs: { hcaptcha: 5 } }, ["latencyMs.hcaptcha"]],
      [{ keys: { k: { threads: "ten" } } }, ["keys.k.threads"]],
      [{ port: 1234 }, ["port"]],
      [{ surprise: true }, ["surprise"]],
    ];
    for (const [body, fields] of cases) {
      const r = await postConfig(h, JSON.stringify(body));
      expect(r.status).toBe(400);
      expect(r.json.error).toBe("invalid_config");
      expect(r.json.fields).toEqual(fields);
    }
    const notJson = await postConfig(h, "{not json");
    expect(notJson.status).toBe(400);
    expect(notJson.json.error).toBe("invalid_json");
    expect((await h.get("/in.php", RECAPTCHA)).body).toMatch(/^OK\|/);
  });

  test("POST /emulator/config changes latency and keys at runtime; GET shows it without listing keys", async () => {
    const h = await emu();
    const r = await postConfig(h, JSON.stringify({ latencyMs: 10_000, keys: { fresh: { threads: 1 } } }));
    expect(r.status).toBe(200);
    expect(r.json.config).toMatchObject({ latencyMs: 10_000, keyCount: 1 });
    expect(JSON.stringify(await (await fetch(`${h.url}/emulator/config`)).json())).not.toContain("fresh");
    expect((await h.get("/in.php", RECAPTCHA)).body).toBe("ERROR_WRONG_USER_KEY");
    const id = await h.submit({ ...RECAPTCHA, key: "fresh" });
    expect((await h.get("/res.php", { key: "fresh", action: "get", id })).body).toBe("CAPCHA_NOT_READY");
  });

  test("configure() throws EmulatorConfigError naming the field; createEmulator validates too", async () => {
    const h = await emu();
    try {
      h.emulator.configure({ faults: { pollErrorRate: -1 } });
      throw new Error("expected a throw");
    } catch (err) {
      expect(err).toBeInstanceOf(EmulatorConfigError);
      expect((err as EmulatorConfigError).fields).toEqual(["faults.pollErrorRate"]);
    }
    expect(() => h.emulator.configure({ port: 1 })).toThrow(EmulatorConfigError);
    expect(() => createEmulator({ keys: { k: { threads: -1 } } })).toThrow(EmulatorConfigError);
  });

  test("GET /emulator/tasks/<id> shows the issued answer; unknown id is 404", async () => {
    const h = await emu();
    const id = await h.submit(RECAPTCHA);
    const view = (await (await fetch(`${h.url}/emulator/tasks/${id}`)).json()) as Record<string, unknown>;
    expect(view).toMatchObject({
      id,
      method: "userrecaptcha",
      answer: h.emulator.task(id)!.answer,
      fingerprint: fingerprintOf("userrecaptcha", TASK),
    });
    expect(JSON.stringify(view)).not.toContain(KEY);
    expect((await fetch(`${h.url}/emulator/tasks/1`)).status).toBe(404);
  });

  test("POST /emulator/reset forgets tasks and zeroes stats; resetStats() keeps tasks", async () => {
    const h = await emu();
    const kept = await h.submit(RECAPTCHA);
    h.emulator.resetStats();
    expect(h.emulator.stats().submissions).toBe(0);
    expect((await h.get("/res.php", { key: KEY, action: "get", id: kept })).body).toStartWith("OK|");
    const r = await fetch(`${h.url}/emulator/reset`, { method: "POST" });
    expect(r.status).toBe(200);
    expect((await h.get("/res.php", { key: KEY, action: "get", id: kept })).body).toBe("ERROR_WRONG_CAPTCHA_ID");
    expect((await (await fetch(`${h.url}/emulator/stats`)).json()) as Record<string, unknown>).toMatchObject({
      submissions: 0,
      polls: 1,
      resCalls: 1,
    });
  });
});

describe("stats", () => {
  test("byFingerprint counts accepted submissions per task, ignoring key/json/soft_id/header_acao/pingback", async () => {
    const h = await emu({ keys: { [KEY]: { threads: 10 }, other: { threads: 10 } } });
    await h.submit(RECAPTCHA);
    const noisy = await h.get("/in.php", {
      ...RECAPTCHA,
      key: "other",
      json: "1",
      soft_id: "4587",
      header_acao: "1",
      pingback: "https://cb.test",
    });
    expect(noisy.body).toMatch(/^\{"status":1,/);
    await h.submit({ ...RECAPTCHA, pageurl: "https://example.test/other" });
    await h.get("/in.php", { ...RECAPTCHA, googlekey: "" }); // rejected, not fingerprinted
    const s = h.emulator.stats();
    expect(s.submissions).toBe(3);
    expect(s.rejectedSubmissions).toBe(1);
    expect(s.byFingerprint).toEqual({
      [fingerprintOf("userrecaptcha", TASK)]: 2,
      [fingerprintOf("userrecaptcha", { ...TASK, pageurl: "https://example.test/other" })]: 1,
    });
    expect(s.duplicateFingerprints).toBe(1);
  });

  test("paidAtByFingerprint: when each accepted submission of a task was made (epoch ms), over GET /emulator/stats; reset forgets them", async () => {
    let clock = 1_700_000_000_000;
    const h = await emu({ now: () => clock });
    const other = { ...RECAPTCHA, pageurl: "https://example.test/other" };
    await h.submit(RECAPTCHA);
    clock += 1500;
    await h.submit(other);
    clock += 250;
    await h.submit(RECAPTCHA);
    await h.get("/in.php", { ...RECAPTCHA, googlekey: "" }); // rejected: not paid, no time
    const s = (await (await fetch(`${h.url}/emulator/stats`)).json()) as Record<string, unknown>;
    expect(s.paidAtByFingerprint).toEqual({
      [fingerprintOf("userrecaptcha", TASK)]: [1_700_000_000_000, 1_700_000_001_750],
      [fingerprintOf("userrecaptcha", { ...TASK, pageurl: "https://example.test/other" })]: [1_700_000_001_500],
    });
    // As many times as byFingerprint counts, and the snapshot is a copy.
    const snap = h.emulator.stats();
    for (const [f, n] of Object.entries(snap.byFingerprint)) expect(snap.paidAtByFingerprint[f]).toHaveLength(n);
    snap.paidAtByFingerprint[fingerprintOf("userrecaptcha", TASK)]!.push(0);
    expect(h.emulator.stats().paidAtByFingerprint[fingerprintOf("userrecaptcha", TASK)]).toHaveLength(2);
    await fetch(`${h.url}/emulator/reset`, { method: "POST" });
    expect(h.emulator.stats().paidAtByFingerprint).toEqual({});
  });

  test("an image fingerprint is over its base64 text (for method=post: under `file`)", async () => {
    const h = await emu();
    const body = Buffer.from("some image bytes").toString("base64");
    await h.submit({ key: KEY, method: "base64", body });
    const form = new FormData();
    form.append("key", KEY);
    form.append("method", "post");
    form.append("file", new Blob([Buffer.from("some image bytes")]), "c.png");
    await h.post("/in.php", form);
    expect(h.emulator.stats().byFingerprint).toEqual({
      [fingerprintOf("base64", { body })]: 1,
      [fingerprintOf("post", { file: body })]: 1,
    });
  });

  test("polls count get calls (a bulk get as one), pollsByProviderId counts per id, resCalls counts every call", async () => {
    const h = await emu({ latencyMs: 10_000 });
    const a = await h.submit(RECAPTCHA);
    const b = await h.submit(RECAPTCHA);
    await h.get("/res.php", { key: KEY, action: "get", id: a });
    await h.get("/res.php", { key: KEY, action: "get", ids: `${a},${b}` });
    await h.get("/res.php", { key: KEY, action: "get2", id: b });
    await h.get("/res.php", { key: KEY, action: "getbalance" });
    await h.get("/res.php", { key: KEY, action: "reportgood", id: a });
    const s = h.emulator.stats();
    expect(s.polls).toBe(3);
    expect(s.resCalls).toBe(5);
    expect(s.pollsByProviderId).toEqual({ [a]: 2, [b]: 2 });
  });

  test("inFlightByKey and maxInFlightByKey follow concurrent submissions and reads", async () => {
    const h = await emu({ keys: { [KEY]: { threads: 50 } }, latencyMs: 0 });
    const ids = await Promise.all(Array.from({ length: 7 }, () => h.submit(RECAPTCHA)));
    expect(h.emulator.stats().inFlightByKey).toEqual({ [KEY]: 7 });
    for (const id of ids.slice(0, 5)) await h.get("/res.php", { key: KEY, action: "get", id });
    await h.submit(RECAPTCHA);
    const s = h.emulator.stats();
    expect(s.inFlightByKey).toEqual({ [KEY]: 3 });
    expect(s.maxInFlightByKey).toEqual({ [KEY]: 7 });
    expect(JSON.parse(JSON.stringify(s))).toEqual(s);
  });
});
