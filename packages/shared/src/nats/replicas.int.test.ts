// Stream replicas on a 3-node NATS cluster (a region as production runs it): STREAM_REPLICAS=3 gives
// TASKS, EVENTS and DLQ three copies, an app started with the default (1) does not scale them back
// down, and a stream keeps serving when the node leading it is killed.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { freePort, type NatsServerHandle, startNatsServer } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import { streams, taskSubject } from "../subjects.ts";
import { connectNats, type NatsConnection } from "./connection.ts";
import { ensureStreams } from "./topology.ts";

const REGION = "rp";
const nodes: NatsServerHandle[] = [];
const dirs: string[] = [];
let nc: NatsConnection;

beforeAll(async () => {
  const ports = await Promise.all([0, 1, 2].map(async () => ({ client: await freePort(), route: await freePort() })));
  for (const [i, p] of ports.entries()) {
    const dir = mkdtempSync(join(tmpdir(), `nats-rp${i}-`));
    dirs.push(dir);
    nodes.push(
      await startNatsServer({
        port: p.client,
        storeDir: dir,
        name: `rp-${i}`,
        regions: [REGION],
        ...(nodes[0] ? { credentialsFrom: nodes[0].credentialsFile } : {}),
        cluster: {
          name: "rp",
          port: p.route,
          routes: ports.filter((_, j) => j !== i).map((o) => ({ host: "127.0.0.1", port: o.route })),
        },
      }),
    );
  }
  nc = await connectNats(nodes.map((n) => n.url).join(","), "replicas-test", nodes[0]!.auth("admin"));
  // The cluster's JetStream is ready once a meta leader is elected.
  await eventually(
    async () => (await (await jetstreamManager(nc)).getAccountInfo().catch(() => undefined)) !== undefined,
    30_000,
    250,
  );
}, 60_000);
afterAll(async () => {
  await nc?.close().catch(() => {});
  for (const n of nodes) await n.stop().catch(() => {});
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
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
  const victim = nodes[Number(/^rp-(\d)$/.exec(leader)![1])]!;
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
