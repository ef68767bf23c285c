import { afterAll, beforeAll, expect, test } from "bun:test";
import { type JetStreamManager, jetstreamManager, RetentionPolicy } from "@nats-io/jetstream";
import { startTestNats, type TestNats } from "@pipeline/devstack/testing";
import { connectNats, type NatsConnection } from "./connection.ts";
import { ensureConsumer, ensureLaneConsumers, ensureStream, ensureStreams, TopologyError } from "./topology.ts";
import { MIN_NATS_SERVER, versionAtLeast } from "./version.ts";

let nats: TestNats;
let nc: NatsConnection;
let jsm: JetStreamManager;
beforeAll(async () => {
  nats = await startTestNats();
  nc = await connectNats(nats.url, "topology-test", nats.auth("admin"));
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

test("fields of the current server stick: per-message TTL (2.11) and consumer pause (2.11) read back", async () => {
  await ensureStream(jsm, { name: "TTLS", subjects: ["ttls.>"], allow_msg_ttl: true } as never);
  expect(((await jsm.streams.info("TTLS")).config as unknown as Record<string, unknown>).allow_msg_ttl).toBe(true);
  // Trailing zeros in the milliseconds: the server reads them back trimmed (".700Z" as ".7Z").
  const at = new Date(Date.now() + 3600_000);
  at.setUTCMilliseconds(700);
  const until = at.toISOString();
  await ensureConsumer(jsm, "TTLS", {
    durable_name: "paused",
    filter_subjects: ["ttls.a", "ttls.b"],
    pause_until: until,
  } as never);
  const c = await jsm.consumers.info("TTLS", "paused");
  expect(c.config.filter_subjects).toEqual(["ttls.a", "ttls.b"]);
  expect(c.paused).toBe(true);
});

test("an unknown field is refused by the server (2.9 dropped it silently) and the error names it", async () => {
  const cfg = { name: "DROPPY", subjects: ["droppy.>"], made_up_field: true } as never;
  await expect(ensureStream(jsm, cfg)).rejects.toThrow(/unknown field "made_up_field"/);
});

test("a value the server does not keep as asked still fails loudly: the read-back guard stays", async () => {
  // The server stores 0 replicas as 1: accepted, not kept. The guard names the field.
  const err = await ensureStream(jsm, { name: "ZERO", subjects: ["zero.>"], num_replicas: 0 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(TopologyError);
  expect((err as TopologyError).field).toBe("num_replicas");
});

test("the server is at least the version the project needs", async () => {
  expect(versionAtLeast(nats.version, MIN_NATS_SERVER)).toBe(true);
  expect(versionAtLeast(nc.info!.version, MIN_NATS_SERVER)).toBe(true);
});

test("EVENTS limits an operator raised are kept by the next start (docs/runbook.md, Sizing EVENTS); never lowered", async () => {
  await ensureStreams(jsm, { region: "r2" });
  const info = await jsm.streams.info("EVENTS_R2");
  await jsm.streams.update("EVENTS_R2", { ...info.config, max_bytes: 4 * 1024 ** 3, max_msgs: 10_000_000 });
  await ensureStreams(jsm, { region: "r2" });
  const after = (await jsm.streams.info("EVENTS_R2")).config;
  expect(after.max_bytes).toBe(4 * 1024 ** 3);
  expect(after.max_msgs).toBe(10_000_000);
  // A smaller limit is raised back to what the apps ask for.
  await jsm.streams.update("EVENTS_R2", { ...after, max_bytes: 1024 ** 2 });
  await ensureStreams(jsm, { region: "r2" });
  expect((await jsm.streams.info("EVENTS_R2")).config.max_bytes).toBe(1024 ** 3);
});
