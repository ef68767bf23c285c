// Stream replicas on a 3-node NATS cluster (a region as production runs it): STREAM_REPLICAS=3 gives
// TASKS, EVENTS and DLQ three copies, an app started with the default (1) does not scale them back
// down, and a stream keeps serving when the node leading it is killed.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { type NatsCluster, startNatsCluster } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import { streams, taskSubject } from "../subjects.ts";
import { connectNats, type NatsConnection } from "./connection.ts";
import { ensureStreams } from "./topology.ts";

const REGION = "rp";
let cluster: NatsCluster;
let nc: NatsConnection;

beforeAll(async () => {
  cluster = await startNatsCluster("rp", [REGION]);
  nc = await connectNats(cluster.handle.url, "replicas-test", cluster.handle.auth("admin"));
}, 60_000);
afterAll(async () => {
  await nc?.close().catch(() => {});
  await cluster?.handle.stop().catch(() => {});
});

test("STREAM_REPLICAS=3 gives each stream three copies; an app with the default does not scale them down", async () => {
  const jsm = await jetstreamManager(nc);
  await eventually(
    () =>
      ensureStreams(jsm, { region: REGION, replicas: 3 })
        .then(() => true)
        .catch(() => false),
    30_000,
    500,
  );
  for (const s of [streams.tasks(REGION), streams.events(REGION), streams.dlq(REGION)]) {
    const info = await jsm.streams.info(s);
    expect(info.config.num_replicas).toBe(3);
    await eventually(async () => ((await jsm.streams.info(s)).cluster?.replicas?.length ?? 0) === 2, 20_000, 250);
  }
  await ensureStreams(jsm, { region: REGION });
  expect((await jsm.streams.info(streams.tasks(REGION))).config.num_replicas).toBe(3);
}, 90_000);

test("a message accepted before the stream's leader node is killed -9 is still there, and the stream takes new ones", async () => {
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  await js.publish(taskSubject(REGION, "normal", 0), "before");
  const leader = (await jsm.streams.info(streams.tasks(REGION))).cluster!.leader!;
  // The node leading TASKS dies (kill -9, not a shutdown).
  const victim = cluster.nodes[Number(/^rp-(\d)$/.exec(leader)![1]) - 1]!;
  await victim.kill();
  await eventually(
    async () => {
      const info = await jsm.streams.info(streams.tasks(REGION)).catch(() => undefined);
      return info?.cluster?.leader && info.cluster.leader !== leader ? info : undefined;
    },
    30_000,
    250,
  );
  await eventually(
    () =>
      js
        .publish(taskSubject(REGION, "normal", 1), "after")
        .then(() => true)
        .catch(() => false),
    20_000,
    250,
  );
  expect((await jsm.streams.info(streams.tasks(REGION))).state.messages).toBe(2);
}, 90_000);
