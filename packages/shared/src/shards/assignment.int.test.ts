// Versioned lane consumers against a real nats-server: the first version takes every shard, a new
// one idles, a move shrinks before it grows, and the whole is idempotent.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { startTestNats, type TestNats } from "@pipeline/devstack/testing";
import { bindBucket } from "../kv/buckets.ts";
import { connectNats, ensureStreams, type NatsConnection } from "../nats/index.ts";
import { buckets, laneConsumer, streams, taskSubject } from "../subjects.ts";
import {
  ensureVersionConsumers,
  moveShards,
  openRolloutBucket,
  readAssignment,
  reconcileConsumers,
  writeAssignment,
} from "./assignment.ts";

const REGION = "sh";
let n: TestNats;
let admin: NatsConnection;
let solverNc: NatsConnection;
let jsm: JetStreamManager;
let solverJsm: JetStreamManager;
let kv: KV;
let solverKv: KV;

beforeAll(async () => {
  n = await startTestNats({ regions: [REGION] });
  admin = await connectNats(n.url, "shards-admin", n.auth("admin"));
  solverNc = await connectNats(n.url, "shards-solver", n.auth("solver"));
  jsm = await jetstreamManager(admin);
  await ensureStreams(jsm, { region: REGION });
  solverJsm = await jetstreamManager(solverNc);
  kv = await openRolloutBucket(admin, REGION);
  // As the solver does: bound, never created (its user may not create a bucket).
  solverKv = await bindBucket(solverNc, buckets.rollout(REGION));
});
afterAll(async () => {
  await solverNc?.close();
  await admin?.close();
  await n?.dispose();
});

const filters = async (lane: "high" | "normal" | "low", version: string) =>
  (await jsm.consumers.info(streams.tasks(REGION), laneConsumer(REGION, lane, version))).config.filter_subjects ?? [];

test("the first solver (with its own NATS user) writes the assignment and takes every shard; a second version idles beside it", async () => {
  const a = await ensureVersionConsumers(solverJsm, solverKv, {
    region: REGION,
    version: "v1",
    ackWaitMs: 30_000,
    by: "test",
  });
  expect(new Set(a.owners)).toEqual(new Set(["v1"]));
  expect(await filters("normal", "v1")).toHaveLength(16);
  const b = await ensureVersionConsumers(solverJsm, solverKv, {
    region: REGION,
    version: "v2",
    ackWaitMs: 30_000,
    by: "test",
  });
  expect(b.owners).toEqual(a.owners);
  expect(await filters("normal", "v2")).toEqual([`tasks.${REGION}.normal.idle_v2`]);
});

test("a move shrinks the losing version before it grows the winner, and the tasks of a moved shard reach the winner", async () => {
  const { assignment, revision } = (await readAssignment(kv))!;
  const next = moveShards(assignment, [0, 1, 2, 3], "v2", "test");
  await writeAssignment(kv, next, revision);
  const r = await reconcileConsumers(jsm, REGION, next, ["v1", "v2"], 30_000);
  expect(r.changed).toHaveLength(6);
  expect(await filters("high", "v2")).toEqual([0, 1, 2, 3].map((s) => taskSubject(REGION, "high", s)));
  expect(await filters("high", "v1")).toHaveLength(12);
  // Idempotent: nothing to change the second time.
  expect((await reconcileConsumers(jsm, REGION, next, ["v1", "v2"], 30_000)).changed).toEqual([]);
  const js = jetstream(admin);
  await js.publish(taskSubject(REGION, "normal", 2), JSON.stringify({ n: 1 }));
  const m = await (await js.consumers.get(streams.tasks(REGION), laneConsumer(REGION, "normal", "v2"))).next({
    expires: 2000,
  });
  expect(m?.subject).toBe(taskSubject(REGION, "normal", 2));
  m?.ack();
});

test("a solver restarting after the move keeps its own shards and touches no other version's consumers", async () => {
  await ensureVersionConsumers(solverJsm, solverKv, { region: REGION, version: "v1", ackWaitMs: 30_000, by: "test" });
  expect(await filters("low", "v1")).toHaveLength(12);
  expect(await filters("low", "v2")).toHaveLength(4);
});

test("moving everything back leaves the other version idle, not filtering every subject", async () => {
  const { assignment, revision } = (await readAssignment(kv))!;
  const back = moveShards(assignment, [0, 1, 2, 3], "v1", "test");
  await writeAssignment(kv, back, revision);
  await reconcileConsumers(jsm, REGION, back, ["v1", "v2"], 30_000);
  expect(await filters("high", "v2")).toEqual([`tasks.${REGION}.high.idle_v2`]);
  expect(await filters("high", "v1")).toHaveLength(16);
  // A write on a stale revision is refused (compare-and-set).
  await expect(writeAssignment(kv, assignment, revision)).rejects.toThrow();
});

test("the versions with lane consumers are listed from the stream (what a reconcile must look at)", async () => {
  const { consumerVersions } = await import("./assignment.ts");
  expect((await consumerVersions(jsm, REGION)).sort()).toEqual(["v1", "v2"]);
});
