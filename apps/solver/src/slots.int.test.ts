// The fleet-wide provider plan, leased in blocks (issue 13), against real Postgres, NATS and the
// emulator: the plan's threads are never exceeded (a task redelivered while its dead holder's
// provider task runs; two solvers sharing a plan), no task writes a slot row, a plan full of a
// dead solver's provider tasks is worked off, and a stopped solver's block is given back.
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { type JetStreamClient, jetstream } from "@nats-io/jetstream";
import {
  createTestDatabase,
  eventually,
  natsEnv,
  readTaskEvents,
  startTestNats,
  type TestDatabase,
  type TestNats,
} from "@pipeline/devstack/testing";
import { createEmulator, type Emulator } from "@pipeline/emulator";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { workerNameOf } from "@pipeline/shared/kv";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import { shardOf, taskSubject } from "@pipeline/shared/subjects";
import { createBatchedWrites } from "./adapters/batched-writes.ts";
import { createProviderSlots } from "./adapters/slots.ts";
import { loadConfig } from "./config.ts";
import { keyRefOf } from "./domain/key-ref.ts";
import { type SolverService, startSolver } from "./service.ts";

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
  [nats, tdb] = await Promise.all([startTestNats({ regions: [REGION], provision: true }), createTestDatabase("slots")]);
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
    // The solver's own database role (issue 34), as in production.
    DATABASE_URL: tdb.appUrls.solver,
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
const turnstile = () => ({
  type: "turnstile",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/slots/${++n}` },
});

const publish = (id: string) =>
  js.publish(
    taskSubject(REGION, "normal", shardOf(id)),
    JSON.stringify({ id, type: "turnstile", priority: "normal" }),
    { msgID: `${id}:${Date.now()}` },
  );

/** A provider task submitted with the key, as a solver would have (it occupies one of the key's threads at the emulator). */
async function providerTask(params: { sitekey: string; pageurl: string }): Promise<string> {
  const res = await fetch(`${emu.url}/in.php`, {
    method: "POST",
    body: new URLSearchParams({ key: KEY, json: "1", method: "turnstile", ...params }),
  });
  const r = (await res.json()) as { status: number; request: string };
  if (r.status !== 1) throw new Error(`in.php: ${r.request}`);
  return r.request;
}

const stateOf = async (id: string) =>
  (await database.sql<{ state: string }[]>`select state from tasks where id = ${id}`)[0]?.state;

const insertQueued = async (id: string, spec = turnstile()) =>
  database.sql`insert into tasks (id, owner, request_hash, region, type, priority, params, state) values (${id}, 'o', 'h', ${REGION}, 'turnstile', 'normal', ${JSON.stringify(spec.params)}::jsonb, 'queued')`;

/** A task a solver killed -9 had submitted: solving, its provider task running, its lease `leaseS` more seconds. */
async function deadHoldersTask(leaseS: number): Promise<string> {
  const id = crypto.randomUUID();
  const spec = turnstile();
  const pid = await providerTask(spec.params);
  await database.sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, attempts, version, provider_id, provider_key_ref, provider_submissions, lease_owner, lease_until, started_at)
    values (${id}, 'o', 'h', ${REGION}, 'turnstile', 'normal', ${JSON.stringify(spec.params)}::jsonb, 'solving', 1, 1, ${pid}, ${KEY_REF}, 1, 'dead-solver', now() + ${`${leaseS} seconds`}::interval, now())`;
  return id;
}

test("a task redelivered while its dead holder's lease runs: its provider task stays counted, the plan's threads are never exceeded", async () => {
  // A one-thread plan. Task A was claimed and submitted by a solver that was then killed -9: its
  // row is leased to it for 4 s more and its provider task runs (the plan's only thread).
  const threads = 1;
  const a = await deadHoldersTask(4);
  // A live solver gets A's message again (redelivered): no unit is free (A counts), A needs none
  // (it has a provider id), and the dead holder's lease still runs: "another worker holds the lease".
  const solver = await startSolver(config({ PROVIDER_THREADS: String(threads), DEAD_AFTER_MS: "0" }), log);
  solvers.push(solver);
  await publish(a);
  await eventually(() => (solver.worker.counters.busyNaks ?? 0) >= 1, 10_000, 20);
  const b = crypto.randomUUID();
  await insertQueued(b);
  await publish(b);
  await eventually(async () => (await stateOf(a)) === "completed" && (await stateOf(b)) === "completed", 30_000, 100);
  const stats = emu.stats();
  // A's provider task (submitted before) and B's: never both at the provider at once on a one-thread plan.
  expect(stats.submissions).toBe(2);
  expect(stats.maxInFlightByKey[KEY]).toBe(threads);
}, 60_000);

test("a plan full of a dead solver's provider tasks is worked off: they are taken up without a unit, then new work starts", async () => {
  // Kill-storm shape: every thread of a 3-thread plan is a dead solver's provider task (its
  // leases run out at once). A live solver must finish them (no unit needed) before it may submit more.
  const threads = 3;
  const dead = await Promise.all(Array.from({ length: threads }, () => deadHoldersTask(0)));
  const fresh = Array.from({ length: 3 }, () => crypto.randomUUID());
  for (const id of fresh) await insertQueued(id);
  const solver = await startSolver(
    config({ PROVIDER_THREADS: String(threads), DEAD_AFTER_MS: "0", SLOT_WAIT_MS: "300", WORKER_ID: "plan-full" }),
    log,
  );
  solvers.push(solver);
  for (const id of [...fresh, ...dead]) await publish(id);
  await eventually(
    async () => {
      const [c] = await database.sql<
        { n: number }[]
      >`select count(*)::int as n from tasks where id = any(${[...dead, ...fresh]}::uuid[]) and state = 'completed'`;
      return c!.n === 2 * threads;
    },
    30_000,
    100,
  );
  const stats = emu.stats();
  expect(stats.submissions).toBe(2 * threads); // the dead solver's 3 (made before) and the 3 fresh ones
  expect(stats.maxInFlightByKey[KEY]).toBeLessThanOrEqual(threads);
  // The claim's event: a resumed task says `solving` (no submit follows), a fresh one says it with
  // `submitted` (no `solving` before it); both name the worker.
  const events = await eventsOf([...dead, ...fresh]);
  for (const id of dead) expect(events.get(id)).toEqual(["solving:plan-full", "completed"]);
  for (const id of fresh) expect(events.get(id)).toEqual(["submitted:plan-full", "completed"]);
}, 60_000);

/** Each task's events in EVENTS, in order: the kind, and the worker's name where the event names one. */
async function eventsOf(ids: string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const e of await readTaskEvents(nc, REGION, ids)) {
    const worker = typeof e.data?.worker === "string" ? `:${workerNameOf(e.data.worker)}` : "";
    out.set(e.taskId, [...(out.get(e.taskId) ?? []), `${e.kind}${worker}`]);
  }
  return out;
}

test("two solvers share one plan: never over its threads, no slot row per task, a stopped solver's block is gone", async () => {
  const threads = 4;
  const cfg = { PROVIDER_THREADS: String(threads), DEAD_AFTER_MS: "0" };
  const s1 = await startSolver(config({ ...cfg, WORKER_ID: "plan-a" }), log);
  const s2 = await startSolver(config({ ...cfg, WORKER_ID: "plan-b" }), log);
  solvers.push(s1, s2);
  const ids = Array.from({ length: 16 }, () => crypto.randomUUID());
  for (const id of ids) await insertQueued(id);
  const writesBefore = await blockWrites();
  for (const id of ids) await publish(id);
  await eventually(
    async () => {
      const [c] = await database.sql<
        { n: number }[]
      >`select count(*)::int as n from tasks where id = any(${ids}::uuid[]) and state = 'completed'`;
      return c!.n === ids.length;
    },
    60_000,
    100,
  );
  const stats = emu.stats();
  expect(stats.submissions).toBe(ids.length);
  expect(stats.maxInFlightByKey[KEY]).toBeLessThanOrEqual(threads);
  // One block row per solver and key, leased a few times a second: not a row write per task.
  const blocks = await database.sql<
    { owner: string }[]
  >`select owner from provider_slot_blocks where key_ref = ${KEY_REF} order by owner`;
  // Held under `<WORKER_ID>.<incarnation>`: each process start is its own holder.
  expect(blocks.map((b) => b.owner)).toEqual([s1.workerId, s2.workerId]);
  expect(blocks.map((b) => workerNameOf(b.owner))).toEqual(["plan-a", "plan-b"]);
  const leaseWrites = (await blockWrites()) - writesBefore;
  console.log(
    `[slots] 16 tasks on a ${threads}-thread plan, two solvers: max in flight ${stats.maxInFlightByKey[KEY]}, block lease writes ${leaseWrites}`,
  );
  await s1.stop();
  solvers = solvers.filter((s) => s !== s1);
  expect(
    (await database.sql<{ owner: string }[]>`select owner from provider_slot_blocks where key_ref = ${KEY_REF}`).map(
      (b) => b.owner,
    ),
  ).toEqual([s2.workerId]);
}, 90_000);

/** Upserts of provider_slot_blocks so far (pg_stat's counters lag a little; the test only prints them). */
async function blockWrites(): Promise<number> {
  const [r] = await database.sql<
    { n: string }[]
  >`select coalesce(sum(n_tup_ins + n_tup_upd), 0)::text as n from pg_stat_user_tables where relname = 'provider_slot_blocks'`;
  return Number(r?.n ?? 0);
}

test("a completion is one write and takes the task out of the plan's count; one whose lease was lost changes nothing", async () => {
  const writes = createBatchedWrites(database.sql);
  const slots = createProviderSlots(database.sql, {
    owner: "count-test",
    region: REGION,
    threads: 10,
    leaseMs: 6000,
    markerMs: 20_000,
  });
  const before = await slots.held(KEY_REF);
  const id = crypto.randomUUID();
  await database.sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, attempts, version, provider_id, provider_key_ref, lease_owner, lease_until)
    values (${id}, 'o', 'h', ${REGION}, 'turnstile', 'normal', '{}'::jsonb, 'solving', 1, 1, 'p-1', ${KEY_REF}, 'holder', now() + interval '30 seconds')`;
  expect(await slots.held(KEY_REF)).toBe(before + 1);
  const done = { token: "t", userAgent: null, expiresAt: null, polls: 1 };
  // A worker that lost the lease: nothing written, the task still counts.
  expect(await writes.complete({ id, worker: "former-holder", ...done })).toBeUndefined();
  expect(await stateOf(id)).toBe("solving");
  expect(await slots.held(KEY_REF)).toBe(before + 1);
  const r = await writes.complete({ id, worker: "holder", ...done });
  expect(r?.version).toBe(2);
  expect(await stateOf(id)).toBe("completed");
  expect(await slots.held(KEY_REF)).toBe(before);
});

test("a key no unit was taken of for a while gives its block up (a key rotated away); a later take leases it anew", async () => {
  const slots = createProviderSlots(database.sql, {
    owner: "idle-test",
    region: REGION,
    threads: 5,
    leaseMs: 2000,
    markerMs: 20_000,
    idleMs: 300,
  });
  const blockOf = async () =>
    (
      await database.sql<
        { size: number }[]
      >`select size from provider_slot_blocks where owner = 'idle-test' and key_ref = 'key_idle'`
    )[0];
  const unit = await slots.take("key_idle", "normal", 2000);
  expect(unit).toBeDefined();
  expect(await blockOf()).toBeDefined();
  unit!.free();
  await slots.lease();
  expect(await blockOf()).toBeDefined(); // used a moment ago
  await Bun.sleep(400);
  await slots.lease();
  expect(await blockOf()).toBeUndefined();
  expect(await slots.take("key_idle", "normal", 2000)).toBeDefined();
  expect(await blockOf()).toBeDefined();
  await slots.stop();
  expect(await blockOf()).toBeUndefined();
});
