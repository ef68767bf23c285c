// The incident detector against a real NATS (the rollout_control bucket, the region bucket, EVENTS)
// and a real Postgres (the incidents table of migration 0015). Proves: a rollout record reaching
// rolledBack opens one incident, closed once the record says the shards are back on stable; ticks
// and a restarted detector (which reads the kept revisions again) leave one row; an adoption record
// opens a closed failover; a breaker open for more than its minute on EVENTS is a storm, one row
// after a restart too; a record that does not parse records nothing.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { openRegionBucket, openWorkersBucket } from "@pipeline/shared/kv";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import { provisionRegion } from "@pipeline/shared/provision";
import { eventSubject } from "@pipeline/shared/subjects";
import { createDetector, type DetectorDeps } from "./detector.ts";
import { adoptAndRecord } from "./job.ts";
import { recordRestoreInto } from "./record.ts";
import { incidentByKey, listIncidents } from "./store.ts";

const region = "incfsn1";
const log = createLogger("incidents-test", { level: "silent" });
let nats: TestNats;
let nc: NatsConnection;
let db: TestDatabase;
let database: Database;
let sql: Database["sql"];
let control: KV;
let regionKv: KV;
let workersKv: KV;

beforeAll(async () => {
  nats = await startTestNats();
  nc = await connectNats(nats.url, "incidents-test", nats.auth("admin"));
  await provisionRegion(nc, { region });
  control = await new Kvm(nc).create("rollout_control", { history: 64 });
  regionKv = await openRegionBucket(nc, region);
  workersKv = await openWorkersBucket(nc, region);
  db = await createTestDatabase("incidents");
  // The service's own pool (drizzle-tuned: timestamps come back as Postgres' text).
  database = openDatabase(db.url, { max: 2 });
  sql = database.sql;
}, 60_000);

afterAll(async () => {
  await database?.close();
  await db?.drop();
  await nc?.close();
  await nats?.dispose();
});

const deps = async (): Promise<DetectorDeps> => ({
  sql,
  region,
  log,
  rolloutControl: async () => control,
  regionKv,
  leaseStillMs: 5000,
  events: { js: jetstream(nc), jsm: await jetstreamManager(nc), workersKv },
});

const record = (state: string, log: unknown[]) =>
  JSON.stringify({
    id: "v2-20261206100000",
    plan: { version: "v2", stable: "v1", regions: [region], steps: [5, 100], bakeMs: 1000, gate: {} },
    state,
    region: 0,
    step: 0,
    stepStartedAt: 0,
    applied: false,
    log,
    ...(state === "rolledBack" ? { reason: "gate failed in incfsn1 at 5%: extra paid submissions 2 > 0" } : {}),
  });
const T0 = Date.now() - 120_000;
const at = (s: number) => new Date(T0 + s * 1000).toISOString();
const start = { at: at(0), action: "start", why: "v2 replaces v1" };
const moved = { at: at(1), action: "applied", why: "incfsn1: 1 shard(s) to v2" };
const decision = {
  at: at(30),
  action: "rollback",
  region,
  why: "gate failed in incfsn1 at 5%: extra paid submissions 2 > 0",
  figures: { canary: { tasks: 25, extraPaid: 2, extraPaidMicros: 2900 }, stable: { tasks: 300 } },
};
const back = { at: at(32), action: "applied", why: "incfsn1: 1 shard(s) to v1" };

test("a rollback opens one incident, closed when the shards are back on stable; ticks and a restart keep one row", async () => {
  const detector = createDetector(await deps());
  await control.put("current", record("running", [start, moved]));
  expect((await detector.tick()).errors).toEqual([]);
  expect(await incidentByKey(sql, "rollback:v2-20261206100000")).toBeUndefined();

  await control.put("current", record("rolledBack", [start, moved, decision]));
  const t1 = await detector.tick();
  expect(t1.opened).toEqual(["rollback:v2-20261206100000"]);
  const open = (await incidentByKey(sql, "rollback:v2-20261206100000"))!;
  expect(open).toMatchObject({
    kind: "rollback",
    region,
    open: true,
    startedAt: moved.at,
    detectedAt: decision.at,
    tasksAffected: 25,
    extraPaid: 2,
    extraMicros: 2900,
  });

  await control.put("current", record("rolledBack", [start, moved, decision, back]));
  const t2 = await detector.tick();
  expect(t2.closed).toEqual(["rollback:v2-20261206100000"]);
  await detector.tick();
  // A restarted detector reads every kept revision of the record again: still one row.
  const restarted = createDetector(await deps());
  const t3 = await restarted.tick();
  expect(t3.opened).toEqual([]);
  const rows = (await listIncidents(sql)).filter((i) => i.kind === "rollback");
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({ open: false, endedAt: back.at, recoveredAt: back.at, mttrMs: 31_000 });
  expect(rows[0]!.detectToRecoverMs).toBe(2000);
  expect(rows[0]!.timeline.map((e) => e.what)).toEqual([
    `applied: ${moved.why}`,
    `rollback ${region}: ${decision.why}`,
    `applied: ${back.why}`,
  ]);
});

test("a record that does not parse records nothing and is reported, not thrown", async () => {
  const before = (await listIncidents(sql)).length;
  await control.put("current", JSON.stringify({ id: "", state: "rolledBack", log: "nope" }));
  const r = await createDetector(await deps()).tick();
  expect(r.errors).toEqual([]);
  expect((await listIncidents(sql)).length).toBe(before);
});

test("an adoption record of this region's bucket is a failover, closed at the adoption; one row however often seen", async () => {
  const adoptedAt = Date.now() - 10_000;
  await regionKv.put("adopted.inchel1", JSON.stringify({ epoch: 4, phase: "resumable", at: adoptedAt }));
  await createDetector(await deps()).tick();
  await createDetector(await deps()).tick();
  const rows = (await listIncidents(sql)).filter((i) => i.kind === "failover");
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({
    key: "failover:inchel1:4",
    region: "inchel1",
    open: false,
    startedAt: new Date(adoptedAt - 5000).toISOString(),
    mttrMs: 5000,
  });
});

test("a breaker open for more than a minute on EVENTS is a storm; short ones are not; one row after a restart", async () => {
  const js = jetstream(nc);
  const publish = (s: number, worker: string, state: string, keyRef: string) =>
    js.publish(
      eventSubject(region, "breaker"),
      JSON.stringify({ kind: "breaker", region, at: at(s), data: { keyRef, state, reason: null, worker } }),
    );
  await publish(0, "w1", "open", "key_storm");
  await publish(10, "w2", "open", "key_storm");
  await publish(20, "w1", "open", "key_short");
  await publish(40, "w1", "closed", "key_short");
  await publish(50, "w1", "closed", "key_storm");
  await publish(95, "w2", "closed", "key_storm");
  // Each opened incident is told once (the notifications' hook), a restarted detector tells none again.
  const told: string[] = [];
  const onOpened = (o: { key: string; kind: string }) => void told.push(`${o.kind} ${o.key}`);
  const first = await createDetector({ ...(await deps()), onOpened }).tick();
  expect(first.errors).toEqual([]);
  await createDetector({ ...(await deps()), onOpened }).tick();
  const rows = (await listIncidents(sql)).filter((i) => i.kind === "breaker");
  expect(rows).toHaveLength(1);
  expect(told.filter((t) => t.startsWith("breaker "))).toEqual([`breaker ${rows[0]!.key}`]);
  expect(rows[0]).toMatchObject({
    region,
    open: false,
    startedAt: at(0),
    detectedAt: at(60),
    endedAt: at(95),
    mttrMs: 95_000,
    detail: { keyRef: "key_storm", workers: 2 },
  });
});

test("a restore records its audit row and one closed incident in the restored database", async () => {
  const sighting = {
    region,
    snapshot: "snap-20261206-100000",
    into: "postgres://127.0.0.1/restored",
    startedAt: Date.parse(at(0)),
    restoreMs: 900,
    totalMs: 1600,
    replayedEvents: 42,
    tasks: { completed: 40, queued: 2 },
    actor: "cli:alice@host",
  };
  expect(await recordRestoreInto(db.url, sighting)).toBeUndefined();
  expect(await recordRestoreInto(db.url, sighting)).toBeUndefined();
  const rows = (await listIncidents(sql)).filter((i) => i.kind === "restore");
  expect(rows).toHaveLength(1);
  expect(rows[0]).toMatchObject({ open: false, tasksAffected: 42, rtoMs: 1600, mttrMs: 1600 });
  const audit = await sql<{ actor: string }[]>`select actor from audit_log where action = 'restore'`;
  expect(audit.map((a) => a.actor)).toEqual(["cli:alice@host", "cli:alice@host"]);
  // A database without the incidents table (a snapshot from before migration 0015): the error is returned.
  const bare = await createTestDatabase("incidents_bare");
  try {
    const b = openDatabase(bare.url, { max: 1 });
    await b.sql`drop table incidents`;
    await b.close();
    expect(await recordRestoreInto(bare.url, sighting)).toContain("incidents");
  } finally {
    await bare.drop();
  }
});

test("the keeper's adoption records its failover: opened and closed at the resumable phase, the later phase's tasks added", async () => {
  const remote = "incrmt";
  const task = (providerId: string | null) => sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, version, provider_id, created_at, updated_at)
    values (${crypto.randomUUID()}, 'owner-adopt', 'hash', ${remote}, 'turnstile', 'normal',
            ${JSON.stringify({ sitekey: "0x4AAAAAAA", pageurl: "https://example.com/a" })}::text::jsonb, 'solving', 1, ${providerId},
            now() - interval '1 minute', now() - interval '1 minute')`;
  await task("prov-1");
  await task("prov-2");
  await task(null);
  const adopt = adoptAndRecord(
    { REGION: region, PUBLISH_DEADLINE_MS: 5000, LEASE_TTL_MS: 4000, LEASE_MARGIN_MS: 1000 },
    { js: jetstream(nc), jsm: await jetstreamManager(nc), database },
    sql,
    log,
  );
  const before = Date.now();
  expect((await adopt(remote, 7, "resumable")).adopted).toBe(2);
  const first = (await incidentByKey(sql, `failover:${remote}:7`))!;
  expect(first).toMatchObject({ kind: "failover", region: remote, open: false, tasksAffected: 2 });
  expect(Date.parse(first.startedAt)).toBeGreaterThanOrEqual(before - 5000);
  expect(first.mttrMs!).toBeGreaterThanOrEqual(5000);
  expect((await adopt(remote, 7, "all")).adopted).toBe(1);
  const after = (await incidentByKey(sql, `failover:${remote}:7`))!;
  expect(after).toMatchObject({ tasksAffected: 3, endedAt: first.endedAt, startedAt: first.startedAt });
  expect(after.timeline.map((e) => e.what).filter((w) => w.includes("adopted"))).toHaveLength(2);
  // The detector reading the keeper's record of the same takeover adds no second row.
  await regionKv.put(`adopted.${remote}`, JSON.stringify({ epoch: 7, phase: "all", at: Date.now() }));
  await createDetector(await deps()).tick();
  expect((await listIncidents(sql)).filter((i) => i.key === `failover:${remote}:7`)).toHaveLength(1);
});

test("the workers bucket is listed only while a breaker is open: quiet ticks leave no consumer on the server", async () => {
  const consumers = async () => (await workersKv.status()).streamInfo.state.consumer_count;
  const detector = createDetector(await deps());
  await detector.tick();
  const quiet = await consumers();
  for (let i = 0; i < 3; i++) expect((await detector.tick()).errors).toEqual([]);
  expect(await consumers()).toBe(quiet);
  // A breaker open at a worker without a heartbeat: the bucket is listed (a listing's consumer stays).
  await jetstream(nc).publish(
    eventSubject(region, "breaker"),
    JSON.stringify({
      kind: "breaker",
      region,
      at: new Date().toISOString(),
      data: { keyRef: "key_listed", state: "open", reason: null, worker: "w-gone" },
    }),
  );
  expect((await detector.tick()).errors).toEqual([]);
  expect(await consumers()).toBeGreaterThan(quiet);
  // Pruned (no heartbeat): nothing open any more, so the next ticks list nothing again.
  const after = await consumers();
  await detector.tick();
  expect(await consumers()).toBe(after);
});
