import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstreamManager, RetentionPolicy, type JetStreamManager } from "@nats-io/jetstream";
import { startTestNats, type TestNats } from "../testing/index.ts";
import { connectNats, type NatsConnection } from "./connection.ts";
import { ensureLaneConsumers, ensureStream, ensureStreams, TopologyError } from "./topology.ts";

let nats: TestNats;
let nc: NatsConnection;
let jsm: JetStreamManager;
beforeAll(async () => {
  nats = await startTestNats();
  nc = await connectNats(nats.url, "topology-test");
  jsm = await jetstreamManager(nc);
});
afterAll(async () => {
  await nc.close();
  await nats.dispose();
});

test("streams and lane consumers are created once and verified on every start", async () => {
  await ensureStreams(jsm, { region: "r1" });
  await ensureLaneConsumers(jsm, { region: "r1", version: "v1", ackWaitMs: 30_000 });
  await ensureStreams(jsm, { region: "r1" });
  await ensureLaneConsumers(jsm, { region: "r1", version: "v1", ackWaitMs: 30_000 });
  const info = await jsm.streams.info("TASKS_R1");
  expect(info.config.retention).toBe(RetentionPolicy.Workqueue);
  const consumers = [];
  for await (const c of jsm.consumers.list("TASKS_R1")) consumers.push(c.name);
  expect(consumers.sort()).toEqual(["solver_r1_high_v1", "solver_r1_low_v1", "solver_r1_normal_v1"]);
});

test("a field the server does not keep fails loudly (2.9 drops unknown fields)", async () => {
  // `allow_msg_ttl` arrived in nats-server 2.11: 2.9.10 silently drops it.
  const cfg = { name: "DROPPY", subjects: ["droppy.>"], allow_msg_ttl: true } as never;
  await expect(ensureStream(jsm, cfg)).rejects.toBeInstanceOf(TopologyError);
});
