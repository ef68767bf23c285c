// The fleet-wide provider slots against real Postgres, NATS and the emulator (issue 13's two slot
// defects): the plan's threads are never exceeded when a task is redelivered while its dead
// holder's provider task is still running.
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { jetstream, type JetStreamClient } from "@nats-io/jetstream";
import { createEmulator, type Emulator } from "@pipeline/emulator";
import { openDatabase, tasks, type Database } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import { shardOf, taskSubject } from "@pipeline/shared/subjects";
import { createTestDatabase, eventually, natsEnv, startTestNats, type TestDatabase, type TestNats } from "@pipeline/shared/testing";
import { createBatchedWrites } from "./adapters/batched-writes.ts";
import { loadConfig } from "./config.ts";
import { keyRefOf } from "./domain/key-ref.ts";
import { startSolver, type SolverService } from "./service.ts";

const REGION = "slots";
const KEY = "slots-test-key";
const KEY_REF = keyRefOf(KEY);
let nats: TestNats;
let tdb: TestDatabase;
let emu: Emulator;
let nc: NatsConnection;
let js: JetStreamClient;
let database: Database;
let solvers: SolverService[] = [];

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats({ regions: [REGION] }), createTestDatabase("slots")]);
  // The emulator allows far more than the plan the solvers are told (PROVIDER_THREADS), so an
  // excess shows in its maxInFlightByKey instead of as rejected submissions.
  emu = createEmulator({ port: 0, keys: { [KEY]: { threads: 100 } }, latencyMs: 1500 });
  await emu.start();
  nc = await connectNats(nats.url, "slots-test", nats.auth("admin"));
  js = jetstream(nc);
  database = openDatabase(tdb.url, { max: 5 });
});
afterEach(async () => {
  await Promise.all(solvers.map((s) => s.stop()));
  solvers = [];
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
    DATABASE_URL: tdb.url,
    REGION,
    PROVIDER_URL: emu.url,
    PROVIDER_KEY: KEY,
    FIRST_POLL_MS: "100",
    POLL_INTERVAL_MS: "100",
    ACK_WAIT_MS: "5000",
    LEASE_MS: "5000",
    DRAIN_TIMEOUT_MS: "1000",
    METRICS_PORT: "0",
    ...over,
  });
}
const log = createLogger("slots-test", { level: "silent" });
let n = 0;
const turnstile = () => ({ type: "turnstile", params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/slots/${++n}` } });

const publish = (id: string) => js.publish(taskSubject(REGION, "normal", shardOf(id)), JSON.stringify({ id, type: "turnstile", priority: "normal" }), { msgID: `${id}:${Date.now()}` });

/** A provider task submitted with the key, as a solver would have (it occupies one of the key's threads at the emulator). */
async function providerTask(params: { sitekey: string; pageurl: string }): Promise<string> {
  const res = await fetch(`${emu.url}/in.php`, { method: "POST", body: new URLSearchParams({ key: KEY, json: "1", method: "turnstile", ...params }) });
  const r = (await res.json()) as { status: number; request: string };
  if (r.status !== 1) throw new Error(`in.php: ${r.request}`);
  return r.request;
}

const stateOf = async (id: string) => (await database.sql<{ state: string }[]>`select state from tasks where id = ${id}`)[0]?.state;

test("a task redelivered while its dead holder's lease runs keeps the dead holder's slot: the plan's threads are never exceeded", async () => {
  // A one-thread plan. Task A was claimed and submitted by a solver that was then killed -9: its
  // row is leased to it for 4 s more, it holds the plan's only slot, and its provider task runs.
  const threads = 1;
  await database.sql`insert into provider_slots (key_ref, slot) values (${KEY_REF}, 0) on conflict do nothing`;
  const a = crypto.randomUUID();
  const specA = turnstile();
  const pidA = await providerTask(specA.params);
  await database.sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, attempts, version, provider_id, provider_key_ref, provider_submissions, lease_owner, lease_until, started_at)
    values (${a}, 'o', 'h', ${REGION}, 'turnstile', 'normal', ${JSON.stringify(specA.params)}::jsonb, 'solving', 1, 1, ${pidA}, ${KEY_REF}, 1, 'dead-solver', now() + interval '4 seconds', now())`;
  await database.sql`update provider_slots set owner = 'dead-solver', task_id = ${a}, lease_until = now() + interval '4 seconds' where key_ref = ${KEY_REF} and slot = 0`;

  // A live solver gets A's message again (redelivered): the dead holder's lease still runs, so
  // this delivery ends without the task ("another worker holds the lease"). Then a new task B.
  const solver = await startSolver(config({ PROVIDER_THREADS: String(threads), DEAD_AFTER_MS: "0" }), log);
  solvers.push(solver);
  await publish(a);
  await eventually(() => (solver.worker.counters.busyNaks ?? 0) >= 1, 10_000, 20);
  await Bun.sleep(100);

  const b = crypto.randomUUID();
  const specB = turnstile();
  await database.sql`insert into tasks (id, owner, request_hash, region, type, priority, params, state) values (${b}, 'o', 'h', ${REGION}, 'turnstile', 'normal', ${JSON.stringify(specB.params)}::jsonb, 'queued')`;
  await publish(b);

  await eventually(async () => (await stateOf(a)) === "completed" && (await stateOf(b)) === "completed", 30_000, 100);
  const stats = emu.stats();
  // A's provider task (submitted before) and B's: never both at the provider at once on a one-thread plan.
  expect(stats.submissions).toBe(2);
  expect(stats.maxInFlightByKey[KEY]).toBe(threads);
}, 60_000);

test("a completion frees the task's slot in the same statement; one whose lease was lost frees nothing", async () => {
  const writes = createBatchedWrites(database.sql);
  await database.sql`insert into provider_slots (key_ref, slot) values (${KEY_REF}, 7) on conflict do nothing`;
  const id = crypto.randomUUID();
  await database.sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, attempts, version, provider_id, lease_owner, lease_until)
    values (${id}, 'o', 'h', ${REGION}, 'turnstile', 'normal', '{}'::jsonb, 'solving', 1, 1, 'p-1', 'holder', now() + interval '30 seconds')`;
  await database.sql`update provider_slots set owner = 'holder', task_id = ${id}, lease_until = now() + interval '30 seconds' where key_ref = ${KEY_REF} and slot = 7`;
  const slotRow = async () => (await database.sql<{ task_id: string | null; owner: string | null }[]>`select task_id, owner from provider_slots where key_ref = ${KEY_REF} and slot = 7`)[0]!;
  const done = { token: "t", userAgent: null, expiresAt: null, polls: 1, slot: { keyRef: KEY_REF, slot: 7 } };

  // A worker that lost the lease: nothing written, the slot stays the task's.
  expect(await writes.complete({ id, worker: "former-holder", ...done })).toBeUndefined();
  expect(await slotRow()).toEqual({ task_id: id, owner: "holder" });
  expect(await stateOf(id)).toBe("solving");

  const r = await writes.complete({ id, worker: "holder", ...done });
  expect(r?.version).toBe(2);
  expect(await stateOf(id)).toBe("completed");
  expect(await slotRow()).toEqual({ task_id: null, owner: null });
});
