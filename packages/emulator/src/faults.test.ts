import { afterEach, describe, expect, test } from "bun:test";
import { capacityAt } from "./faults.ts";
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
const RECAPTCHA = { key: KEY, method: "userrecaptcha", googlekey: "6LcTest", pageurl: "https://example.test/login" };

describe("fault injection", () => {
  test("errorRate=1 answers ERROR_NO_SLOT_AVAILABLE by default, or errorCode; nothing is accepted", async () => {
    const h = await emu({ faults: { errorRate: 1 } });
    expect((await h.get("/in.php", RECAPTCHA)).body).toBe("ERROR_NO_SLOT_AVAILABLE");
    h.emulator.configure({ faults: { errorRate: 1, errorCode: "ERROR: 1001" } });
    expect((await h.get("/in.php", { ...RECAPTCHA, json: "1" })).body).toBe('{"status":0,"request":"ERROR: 1001"}');
    expect(h.emulator.stats()).toMatchObject({ submissions: 0, rejectedSubmissions: 2 });
  });

  test("errorRate between 0 and 1 follows the random source", async () => {
    const rolls = [0.1, 0.9, 0.4, 0.6];
    let i = 0;
    const h = await emu({ faults: { errorRate: 0.5 }, random: () => rolls[i++ % rolls.length]! });
    const bodies = [];
    for (let n = 0; n < 4; n++) bodies.push((await h.get("/in.php", RECAPTCHA)).body);
    expect(bodies.map((b) => (b.startsWith("OK|") ? "ok" : b))).toEqual([
      "ERROR_NO_SLOT_AVAILABLE",
      "ok",
      "ERROR_NO_SLOT_AVAILABLE",
      "ok",
    ]);
  });

  test("pollErrorRate=1 makes res.php get answer ERROR_SERVER_ERROR (or pollErrorCode); getbalance is unaffected", async () => {
    const h = await emu();
    const id = await h.submit(RECAPTCHA);
    h.emulator.configure({ faults: { pollErrorRate: 1 } });
    expect((await h.get("/res.php", { key: KEY, action: "get", id })).body).toBe("ERROR_SERVER_ERROR");
    h.emulator.configure({ faults: { pollErrorRate: 1, pollErrorCode: "ERROR_INTERNAL_SERVER_ERROR" } });
    expect((await h.get("/res.php", { key: KEY, action: "get", id, json: "1" })).body).toBe(
      '{"status":0,"request":"ERROR_INTERNAL_SERVER_ERROR"}',
    );
    expect((await h.get("/res.php", { key: KEY, action: "getbalance" })).body).toBe("100");
    h.emulator.configure({ faults: {} });
    expect((await h.get("/res.php", { key: KEY, action: "get", id })).body).toStartWith("OK|");
  });

  test("unsolvableRate=1: the finished task answers ERROR_CAPTCHA_UNSOLVABLE, frees its slot and is not charged", async () => {
    const h = await emu({ keys: { [KEY]: { threads: 1 } }, faults: { unsolvableRate: 1 } });
    const id = await h.submit(RECAPTCHA);
    expect((await h.get("/res.php", { key: KEY, action: "get", id })).body).toBe("ERROR_CAPTCHA_UNSOLVABLE");
    expect((await h.get("/res.php", { key: KEY, action: "get", id, json: "1" })).body).toBe(
      '{"status":0,"request":"ERROR_CAPTCHA_UNSOLVABLE"}',
    );
    expect(h.emulator.task(id)).toMatchObject({ unsolvable: true, answer: null });
    expect((await h.get("/res.php", { key: KEY, action: "getbalance" })).body).toBe("100");
    h.emulator.configure({ faults: {} });
    expect((await h.get("/in.php", RECAPTCHA)).body).toMatch(/^OK\|/);
  });

  test("http500Rate=1 serves an HTML 500 page on in.php and res.php, with no side effect", async () => {
    const h = await emu();
    const id = await h.submit(RECAPTCHA);
    h.emulator.configure({ faults: { http500Rate: 1 } });
    for (const r of [await h.get("/in.php", RECAPTCHA), await h.get("/res.php", { key: KEY, action: "get", id })]) {
      expect(r.status).toBe(500);
      expect(r.contentType).toStartWith("text/html");
      expect(r.body).toContain("500 Internal Server Error");
    }
    expect(h.emulator.task(id)?.answerReadAt).toBeNull();
    expect(h.emulator.stats()).toMatchObject({ submissions: 1, rejectedSubmissions: 1, polls: 1 });
  });

  test("outageUntil in the future gives HTML 503 on every protocol call; once past, service resumes", async () => {
    const h = await emu();
    h.emulator.configure({ faults: { outageUntil: Date.now() + 60_000 } });
    const r = await h.get("/in.php", RECAPTCHA);
    expect(r.status).toBe(503);
    expect(r.contentType).toStartWith("text/html");
    expect((await h.get("/res.php", { key: KEY, action: "getbalance" })).status).toBe(503);
    expect((await h.get("/healthz")).status).toBe(200); // the control API stays up
    h.emulator.configure({ faults: { outageUntil: Date.now() - 1 } });
    expect((await h.get("/in.php", RECAPTCHA)).body).toMatch(/^OK\|/);
  });

  test("slowResponseMs delays every protocol reply", async () => {
    const h = await emu({ faults: { slowResponseMs: 80 } });
    const t0 = performance.now();
    await h.get("/res.php", { key: KEY, action: "getbalance" });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(75);
  });

  test("forceCode answers the given code on in.php and on res.php", async () => {
    const h = await emu();
    const id = await h.submit(RECAPTCHA);
    h.emulator.configure({ faults: { forceCode: { inPhp: "ERROR_WRONG_GOOGLEKEY", resPhp: "ERROR_TOKEN_EXPIRED" } } });
    expect((await h.get("/in.php", RECAPTCHA)).body).toBe("ERROR_WRONG_GOOGLEKEY");
    expect((await h.get("/res.php", { key: KEY, action: "get", id })).body).toBe("ERROR_TOKEN_EXPIRED");
    expect((await h.get("/res.php", { key: KEY, action: "get", id, json: "1" })).body).toBe(
      '{"status":0,"request":"ERROR_TOKEN_EXPIRED"}',
    );
  });

  test("faults set over HTTP (POST /emulator/config) take effect and clear with faults: {}", async () => {
    const h = await emu();
    const set = await fetch(`${h.url}/emulator/config`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ faults: { errorRate: 1, errorCode: "MAX_USER_TURN" } }),
    });
    expect(set.status).toBe(200);
    expect((await h.get("/in.php", RECAPTCHA)).body).toBe("MAX_USER_TURN");
    await fetch(`${h.url}/emulator/config`, { method: "POST", body: JSON.stringify({ faults: {} }) });
    expect((await h.get("/in.php", RECAPTCHA)).body).toMatch(/^OK\|/);
  });
});

describe("capacity schedule", () => {
  const steps = [
    { forMs: 1000, threads: 3 },
    { forMs: 500, threads: 1 },
  ];

  test("capacityAt: the step whose time it is, cycling; the last one held without repeat", () => {
    expect(capacityAt(undefined, 5)).toBeUndefined();
    const c = { steps, startAt: 10_000 };
    expect(capacityAt(c, 9_000)).toBe(3); // before the start: the first step
    expect(capacityAt(c, 10_000)).toBe(3);
    expect(capacityAt(c, 10_999)).toBe(3);
    expect(capacityAt(c, 11_000)).toBe(1);
    expect(capacityAt(c, 11_499)).toBe(1);
    expect(capacityAt(c, 11_500)).toBe(3); // the cycle again
    expect(capacityAt({ ...c, repeat: false }, 11_500)).toBe(1);
    expect(capacityAt({ ...c, repeat: false }, 99_999)).toBe(1);
  });

  test("in.php answers ERROR_NO_SLOT_AVAILABLE while a key holds the capacity of the moment", async () => {
    let now = 50_000;
    const h = await emu({
      keys: { [KEY]: { threads: 10 } },
      latencyMs: 60_000,
      now: () => now,
      faults: { capacity: { steps, startAt: 50_000 } },
    });
    const bodies = async (n: number) => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) out.push((await h.get("/in.php", RECAPTCHA)).body.startsWith("OK|") ? "ok" : "busy");
      return out;
    };
    expect(await bodies(4)).toEqual(["ok", "ok", "ok", "busy"]);
    // Capacity 1 now: the three held are over it.
    now = 51_000;
    expect((await h.get("/in.php", RECAPTCHA)).body).toBe("ERROR_NO_SLOT_AVAILABLE");
    // Capacity 3 again, still three held; a read answer frees one.
    now = 51_500;
    expect(await bodies(1)).toEqual(["busy"]);
    expect(h.emulator.stats()).toMatchObject({ submissions: 3, rejectedSubmissions: 3 });
    // The key's own thread limit still applies under a larger capacity.
    h.emulator.configure({
      keys: { [KEY]: { threads: 3 } },
      faults: { capacity: { steps: [{ forMs: 1, threads: 100 }] } },
    });
    expect(await bodies(1)).toEqual(["busy"]);
  });

  test("the control API takes a schedule and names a bad field", async () => {
    const h = await emu();
    const ok = await fetch(`${h.url}/emulator/config`, {
      method: "POST",
      body: JSON.stringify({ faults: { capacity: { steps: [{ forMs: 1000, threads: 2 }], startAt: 0 } } }),
    });
    expect(ok.status).toBe(200);
    const bad = await fetch(`${h.url}/emulator/config`, {
      method: "POST",
      body: JSON.stringify({ faults: { capacity: { steps: [{ forMs: 0, threads: 2 }] } } }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { fields: string[] }).fields).toEqual(["faults.capacity.steps.0.forMs"]);
  });
});
