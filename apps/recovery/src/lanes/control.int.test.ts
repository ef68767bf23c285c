// Pausing a lane against a real nats-server and Postgres: every version's consumer of the lane
// pauses, a restarting solver (its own NATS user, ensureVersionConsumers as at its start, and
// ensureLaneConsumers) leaves it paused, a version created while it is paused starts paused, a
// consumer un-paused behind the record's back is mended, and a resume delivers again.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import {
  createTestDatabase,
  eventually,
  startTestNats,
  type TestDatabase,
  type TestNats,
} from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { bindBucket, openRegionBucket } from "@pipeline/shared/kv";
import { PAUSED_UNTIL_RESUMED, readLaneRecord } from "@pipeline/shared/lanes";
import { connectNats, ensureLaneConsumers, ensureStreams, type NatsConnection } from "@pipeline/shared/nats";
import type { Priority } from "@pipeline/shared/schemas";
import { ensureVersionConsumers, moveShards, readAssignment, reconcileConsumers } from "@pipeline/shared/shards";
import { buckets, laneConsumer, streams, taskSubject } from "@pipeline/shared/subjects";
import { enforceLanes, lanesStatus, listLaneConsumers, pauseLane, resumeLane } from "./control.ts";

const region = "lanes";
const stream = streams.tasks(region);
let nats: TestNats;
let tdb: TestDatabase;
let admin: NatsConnection;
let solverNc: NatsConnection;
let jsm: JetStreamManager;
let kv: KV;
let database: Database;
const deps = () => ({ jsm, kv, db: database.db, region });

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats({ regions: [region], provision: true }), createTestDatabase("lanes")]);
  admin = await connectNats(nats.url, "lanes-admin", nats.auth("admin"));
  solverNc = await connectNats(nats.url, "lanes-solver", nats.auth("solver"));
  jsm = await jetstreamManager(admin);
  kv = await openRegionBucket(admin, region);
  database = openDatabase(tdb.url, { max: 2, appName: "lanes-test" });
}, 60_000);

afterAll(async () => {
  await solverNc?.close();
  await admin?.close();
  await database?.close();
  await nats?.dispose();
  await tdb?.drop();
});

/** A solver's start, as its own NATS user: the assignment and its version's lane consumers. */
async function solverStart(version: string) {
  const sjsm = await jetstreamManager(solverNc);
  const rollout = await bindBucket(solverNc, buckets.rollout(region));
  return ensureVersionConsumers(sjsm, rollout, { region, version, ackWaitMs: 30_000, by: `test ${version}` });
}

const paused = async (lane: Priority) => (await listLaneConsumers(jsm, region))[lane].map((c) => [c.version, c.paused]);

/** One message of the lane's consumer of `version`, or null when it delivers nothing within `ms`. */
async function next(lane: Priority, version: string, ms = 1500) {
  const c = await jetstream(admin).consumers.get(stream, laneConsumer(region, lane, version));
  const m = await c.next({ expires: ms });
  m?.ack();
  return m ? m.string() : null;
}

test("pause: every consumer of the lane, all versions; a restarting solver and a new version keep it paused; resume delivers", async () => {
  await solverStart("v1");
  const r = await pauseLane(deps(), { lane: "normal", reason: "provider incident" }, "console:ops");
  expect(r.failed).toEqual([]);
  expect(r.applied).toEqual([laneConsumer(region, "normal", "v1")]);
  expect(r.state.state).toBe("paused");
  expect(await paused("normal")).toEqual([["v1", true]]);
  expect(await paused("high")).toEqual([["v1", false]]);
  const rec = await readLaneRecord(jsm, region, "normal");
  expect("record" in rec && rec.record).toMatchObject({
    lane: "normal",
    paused: true,
    by: "console:ops",
    reason: "provider incident",
  });
  const info = await jsm.consumers.info(stream, laneConsumer(region, "normal", "v1"));
  expect(Date.parse(info.config.pause_until!)).toBe(Date.parse(PAUSED_UNTIL_RESUMED));

  // A solver restarting (its own user, its start path): still paused.
  await solverStart("v1");
  expect(await paused("normal")).toEqual([["v1", true]]);

  // A new version's consumers, created while the lane is paused, start paused; a shard move (the
  // rollout's shift: filter updates of both versions) keeps both paused.
  await solverStart("v2");
  expect(await paused("normal")).toEqual([
    ["v1", true],
    ["v2", true],
  ]);
  expect(await paused("low")).toEqual([
    ["v1", false],
    ["v2", false],
  ]);
  const a = (await readAssignment(await bindBucket(admin, buckets.rollout(region))))!.assignment;
  await reconcileConsumers(jsm, region, moveShards(a, [0, 1, 2, 3], "v2", "test"), ["v1", "v2"], 30_000);
  expect(await paused("normal")).toEqual([
    ["v1", true],
    ["v2", true],
  ]);

  // Nothing of the lane is delivered; another lane is.
  const js = jetstream(admin);
  await js.publish(taskSubject(region, "normal", 5), "n5");
  await js.publish(taskSubject(region, "high", 5), "h5");
  expect(await next("normal", "v1")).toBeNull();
  expect(await next("high", "v1")).toBe("h5");

  const audit = await database.sql<{ actor: string; action: string; detail: Record<string, unknown> }[]>`
    select actor, action, detail from audit_log where action like 'lane.%' order by id`;
  expect(audit[0]).toMatchObject({ actor: "console:ops", action: "lane.pause", detail: { lane: "normal", region } });

  const back = await resumeLane(deps(), { lane: "normal" }, "cli:alice@host");
  expect(back.state.state).toBe("running");
  expect(back.applied.sort()).toEqual([laneConsumer(region, "normal", "v1"), laneConsumer(region, "normal", "v2")]);
  expect(await paused("normal")).toEqual([
    ["v1", false],
    ["v2", false],
  ]);
  expect(await next("normal", "v1", 3000)).toBe("n5");
  const last = await database.sql<{ actor: string; action: string }[]>`
    select actor, action from audit_log where action like 'lane.%' order by id desc limit 1`;
  expect(last[0]).toEqual({ actor: "cli:alice@host", action: "lane.resume" });
}, 60_000);

test("ensureLaneConsumers (one filter per lane): created paused while the lane is, and left paused on every start", async () => {
  const other = "lanes2";
  await ensureStreams(jsm, { region: other });
  const d = { ...deps(), region: other, kv: await openRegionBucket(admin, other) };
  await pauseLane(d, { lane: "normal", reason: "before any consumer" }, "console:ops");
  await ensureLaneConsumers(jsm, { region: other, version: "v1", ackWaitMs: 30_000 });
  const state = async () => (await listLaneConsumers(jsm, other)).normal.map((c) => c.paused);
  expect(await state()).toEqual([true]);
  expect((await listLaneConsumers(jsm, other)).high.map((c) => c.paused)).toEqual([false]);
  await ensureLaneConsumers(jsm, { region: other, version: "v1", ackWaitMs: 30_000 });
  await ensureLaneConsumers(jsm, { region: other, version: "v1", ackWaitMs: 45_000 });
  expect(await state()).toEqual([true]);
  await resumeLane(d, { lane: "normal" }, "console:ops");
  await ensureLaneConsumers(jsm, { region: other, version: "v1", ackWaitMs: 30_000 });
  expect(await state()).toEqual([false]);
}, 30_000);

test("enforcement mends a consumer un-paused behind the record's back; a resumed record un-pauses", async () => {
  await pauseLane(deps(), { lane: "low" }, "console:ops");
  await jsm.consumers.resume(stream, laneConsumer(region, "low", "v2"));
  expect(await paused("low")).toEqual([
    ["v1", true],
    ["v2", false],
  ]);
  expect(await enforceLanes({ jsm, region })).toEqual([laneConsumer(region, "low", "v2")]);
  expect(await paused("low")).toEqual([
    ["v1", true],
    ["v2", true],
  ]);
  expect(await enforceLanes({ jsm, region })).toEqual([]);
  await resumeLane(deps(), { lane: "low" }, "console:ops");
  await jsm.consumers.pause(stream, laneConsumer(region, "low", "v1"), new Date(Date.now() + 60_000));
  expect(await enforceLanes({ jsm, region })).toEqual([laneConsumer(region, "low", "v1")]);
  expect(await paused("low")).toEqual([
    ["v1", false],
    ["v2", false],
  ]);
}, 30_000);

test("a pause for a while ends by itself: the consumers deliver again and the lane reads running", async () => {
  const r = await pauseLane(deps(), { lane: "high", for: "2s" }, "console:ops");
  expect(r.state.state).toBe("paused");
  expect(r.state.record?.until).toBeDefined();
  await jetstream(admin).publish(taskSubject(region, "high", 10), "h1");
  expect(await next("high", "v1", 1000)).toBeNull();
  await eventually(async () => (await next("high", "v1", 1000)) === "h1", 10_000);
  const high = (await lanesStatus({ jsm, region })).find((l) => l.lane === "high")!;
  expect(high.state).toBe("running");
  expect(high.disagree).toEqual([]);
}, 30_000);
