import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { type JetStreamClient, jetstream } from "@nats-io/jetstream";
import {
  createTestDatabase,
  eventually,
  natsEnv,
  startTestNats,
  type TestDatabase,
  type TestNats,
} from "@pipeline/devstack/testing";
import { createEmulator, type Emulator, fingerprintOf } from "@pipeline/emulator";
import { type Database, openDatabase, tasks } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import { toProviderParams } from "@pipeline/shared/provider";
import type { TaskSpec } from "@pipeline/shared/schemas";
import { shardOf, taskSubject } from "@pipeline/shared/subjects";
import { eq } from "drizzle-orm";
import { loadConfig } from "./config.ts";
import { type SolverService, startSolver } from "./service.ts";

const REGION = "sv";
const KEY = "solver-test-key";
let nats: TestNats;
let tdb: TestDatabase;
let emu: Emulator;
let nc: NatsConnection;
let js: JetStreamClient;
let database: Database;
let solver: SolverService | undefined;

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats({ regions: [REGION], provision: true }), createTestDatabase("sv")]);
  emu = createEmulator({ port: 0, keys: { [KEY]: { threads: 50 } }, latencyMs: 30 });
  await emu.start();
  nc = await connectNats(nats.url, "solver-test", nats.auth("admin"));
  js = jetstream(nc);
  database = openDatabase(tdb.url, { max: 5 });
});
afterEach(async () => {
  await solver?.stop();
  solver = undefined;
  emu.configure({ faults: {} });
  emu.resetStats();
});
afterAll(async () => {
  await nc.close();
  await database.close();
  await emu.stop();
  await Promise.all([nats.dispose(), tdb.drop()]);
});

function config(over: Record<string, string> = {}) {
  return loadConfig({
    NATS_URL: nats.url,
    ...natsEnv(nats, "solver"),
    // The solver's own database role (issue 34), as in production.
    DATABASE_URL: tdb.appUrls.solver,
    REGION,
    PROVIDER_URL: emu.url,
    PROVIDER_KEY: KEY,
    FIRST_POLL_MS: "20",
    POLL_INTERVAL_MS: "20",
    RETRY_BASE_MS: "50",
    RETRY_MAX_MS: "200",
    ACK_WAIT_MS: "5000",
    LEASE_MS: "5000",
    DRAIN_TIMEOUT_MS: "2000",
    METRICS_PORT: "0",
    ...over,
  });
}
const log = createLogger("solver-test", { level: "silent" });
let n = 0;
const turnstile = (): TaskSpec => ({
  type: "turnstile",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/p/${++n}` },
});

/** What the gateway does: the row, then the message. */
async function enqueue(spec: TaskSpec, extra: Partial<typeof tasks.$inferInsert> = {}) {
  const id = crypto.randomUUID();
  await database.db.insert(tasks).values({
    id,
    owner: "o",
    requestHash: "h",
    region: REGION,
    type: spec.type,
    priority: "normal",
    params: spec.params,
    state: "queued",
    ...extra,
  });
  await js.publish(
    taskSubject(REGION, "normal", shardOf(id)),
    JSON.stringify({ id, type: spec.type, priority: "normal" }),
    { msgID: id },
  );
  return id;
}
const row = async (id: string) => (await database.db.select().from(tasks).where(eq(tasks.id, id)))[0]!;
const settled = (id: string, state = "completed") =>
  eventually(async () => ((await row(id)).state === state ? row(id) : undefined), 15_000);

test("solver submits once, stores the provider id, and writes the emulator's token with its expiry", async () => {
  solver = await startSolver(config(), log);
  const spec = turnstile();
  const id = await enqueue(spec);
  const done = await settled(id);
  expect(done.providerId).toMatch(/^\d+$/);
  expect(done.token).toContain(done.providerId!);
  expect(done.tokenExpiresAt!.getTime() - done.completedAt!.getTime()).toBeGreaterThan(110_000);
  expect(done.providerSubmissions).toBe(1);
  expect(emu.stats().byFingerprint[fingerprintOf("turnstile", toProviderParams(spec))]).toBe(1);
});

test("solver resumes polling a stored provider id instead of submitting again", async () => {
  // A provider task submitted by a worker that then died: the row holds its id.
  const spec = turnstile();
  const res = await fetch(`${emu.url}/in.php`, {
    method: "POST",
    body: new URLSearchParams({ key: KEY, json: "1", ...toProviderParams(spec) }),
  });
  const providerId = ((await res.json()) as { request: string }).request;
  const before = emu.stats().submissions;
  const id = await enqueue(spec, {
    state: "solving",
    providerId,
    providerSubmissions: 1,
    leaseOwner: "dead-worker",
    leaseUntil: new Date(Date.now() - 1000),
  });
  solver = await startSolver(config(), log);
  const done = await settled(id);
  expect(done.providerId).toBe(providerId);
  expect(done.token).toContain(providerId);
  expect(emu.stats().submissions).toBe(before);
  expect(solver.worker.counters.resumedPolls).toBe(1);
});

test("a redelivered task that is already completed is acked without calling the provider", async () => {
  const id = await enqueue(turnstile(), { state: "completed", token: "old", providerId: "1" });
  solver = await startSolver(config(), log);
  await eventually(() => (solver!.worker.counters.dedupAcks ?? 0) >= 1);
  expect(emu.stats().submissions).toBe(0);
  expect((await row(id)).token).toBe("old");
});

test("a task-level error fails the task with the provider's code", async () => {
  emu.configure({ faults: { forceCode: { inPhp: "ERROR_PAGEURL" } } });
  solver = await startSolver(config(), log);
  const id = await enqueue(turnstile());
  const failed = await settled(id, "failed");
  expect(failed.errorCode).toBe("ERROR_PAGEURL");
});

test("an error code on res.php while the task waits fails it in the waiting room: failed with the code, claimed once", async () => {
  emu.configure({ faults: { forceCode: { resPhp: "ERROR_WRONG_CAPTCHA_ID" } } });
  solver = await startSolver(config(), log);
  const id = await enqueue(turnstile());
  const failed = await settled(id, "failed");
  expect(failed.errorCode).toBe("ERROR_WRONG_CAPTCHA_ID");
  expect(failed.providerSubmissions).toBe(1);
  // Written by the waiting room without a second claim (no attempt spent on it).
  expect(failed.attempts).toBe(1);
  expect(solver.worker.counters.redeliveries ?? 0).toBe(0);
});

test("waiting tasks live in the waiting room, not in handlers: the room holds them while the provider works", async () => {
  emu.configure({ latencyMs: 1500 });
  try {
    // Polls every 200 ms: 20 of them (the budget) outlast the provider's 1.5 s.
    solver = await startSolver(config({ PROVIDER_THREADS: "20", POLL_INTERVAL_MS: "200" }), log);
    const ids = await Promise.all(Array.from({ length: 20 }, () => enqueue(turnstile())));
    // All 20 submitted and waiting at once (the provider takes 1.5 s).
    await eventually(() => (solver!.worker.waiting() === 20 ? true : undefined), 10_000);
    for (const id of ids) await settled(id);
    expect(solver.worker.waiting()).toBe(0);
    expect(emu.stats().submissions).toBe(20);
  } finally {
    emu.configure({ latencyMs: 30 });
  }
});

test("a retryable error is retried with backoff until it passes", async () => {
  emu.configure({ faults: { forceCode: { inPhp: "ERROR_NO_SLOT_AVAILABLE" } } });
  solver = await startSolver(config(), log);
  const id = await enqueue(turnstile());
  await eventually(async () => (await row(id)).attempts >= 2);
  emu.configure({ faults: {} });
  const done = await settled(id);
  expect(done.providerSubmissions).toBe(1);
  expect(done.attempts).toBeGreaterThanOrEqual(2);
});

test("an unsolvable captcha is resubmitted as a new provider task, bounded", async () => {
  emu.configure({ faults: { unsolvableRate: 1 } });
  solver = await startSolver(config({ MAX_RESUBMITS: "2" }), log);
  const id = await enqueue(turnstile());
  const failed = await settled(id, "failed");
  expect(failed.errorCode).toBe("ERROR_CAPTCHA_UNSOLVABLE");
  expect(failed.providerSubmissions).toBe(3);
});

test("SIGTERM-style stop drains in-flight work: the task completes before stop returns", async () => {
  emu.configure({ latencyMs: 400 });
  // Polls every 50 ms: 20 of them (the budget) outlast the provider's 400 ms with room to spare.
  solver = await startSolver(config({ POLL_INTERVAL_MS: "50" }), log);
  const id = await enqueue(turnstile());
  await eventually(async () => (await row(id)).providerId);
  await solver.stop();
  solver = undefined;
  expect((await row(id)).state).toBe("completed");
  emu.configure({ latencyMs: 30 });
});

test("a key-level error opens the breaker; the task waits (not failed) and completes once the key works", async () => {
  emu.configure({ faults: { forceCode: { inPhp: "ERROR_WRONG_USER_KEY" } } });
  solver = await startSolver(config({ BREAKER_COOLDOWN_MS: "300", BREAKER_MAX_COOLDOWN_MS: "600" }), log);
  const id = await enqueue(turnstile());
  await eventually(() => solver!.breaker.state() !== "closed");
  expect(solver.breaker.reason()).toBe("ERROR_WRONG_USER_KEY");
  await Bun.sleep(1000);
  expect((await row(id)).state).not.toBe("failed");
  emu.configure({ faults: {} });
  const done = await settled(id);
  expect(done.providerSubmissions).toBe(1);
  expect(solver.breaker.state()).toBe("closed");
});

test("HTML 500 pages are retried like network errors, then the task completes", async () => {
  emu.configure({ faults: { http500Rate: 1 } });
  solver = await startSolver(config({ BREAKER_MIN_CALLS: "1000" }), log);
  const id = await enqueue(turnstile());
  await eventually(async () => (await row(id)).attempts >= 2);
  emu.configure({ faults: {} });
  const done = await settled(id);
  expect(done.providerSubmissions).toBe(1);
});

test("ERROR_ZERO_BALANCE stops the key at 2Captcha but is a retry at CaptchaAI", async () => {
  emu.configure({ faults: { forceCode: { inPhp: "ERROR_ZERO_BALANCE" } } });
  solver = await startSolver(
    config({ PROVIDER_PROFILE: "2captcha", BREAKER_COOLDOWN_MS: "60000", BREAKER_MAX_COOLDOWN_MS: "60000" }),
    log,
  );
  const a = await enqueue(turnstile());
  await eventually(() => solver!.breaker.state() === "open");
  expect(solver.breaker.reason()).toBe("ERROR_ZERO_BALANCE");
  // The breaker opens when the reply is read; the row's release to `retrying` is written just after.
  await eventually(async () => (await row(a)).state === "retrying");
  await solver.stop();
  solver = await startSolver(config({ PROVIDER_PROFILE: "captchaai", BREAKER_MIN_CALLS: "1000" }), log);
  const b = await enqueue(turnstile());
  await eventually(async () => (await row(b)).attempts >= 2);
  expect(solver.breaker.state()).toBe("closed");
  emu.configure({ faults: {} });
  await settled(b);
});

test("a task past its deadline is dead-lettered with its last error, never submitted again", async () => {
  const id = await enqueue(turnstile(), {
    deadlineAt: new Date(Date.now() - 1000),
    errorCode: "ERROR_NO_SLOT_AVAILABLE",
  });
  solver = await startSolver(config(), log);
  const failed = await settled(id, "failed");
  expect(failed.errorCode).toBe("ERROR_NO_SLOT_AVAILABLE");
  expect(failed.errorMessage).toBe("dead-lettered: deadline passed");
  expect(emu.stats().submissions).toBe(0);
});
