// What nats-server (>= 2.14) does when a shard of a work-queue stream moves from one consumer to
// another by changing their filter subjects: the ground the rollout service (issue 15) builds on.
// Pinned here so a server upgrade that changes it fails a test, not a rollout.
import { afterAll, beforeAll, expect, test } from "bun:test";
import {
  AckPolicy,
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
} from "@nats-io/jetstream";
import { startTestNats, type TestNats } from "@pipeline/devstack/testing";
import { connectNats, type NatsConnection } from "./index.ts";

let n: TestNats;
let nc: NatsConnection;
let jsm: JetStreamManager;
let js: JetStreamClient;
const cfg = (name: string, f: string[]) => ({
  durable_name: name,
  filter_subjects: f,
  ack_policy: AckPolicy.Explicit,
  deliver_policy: DeliverPolicy.All,
  ack_wait: 30_000_000_000,
});

beforeAll(async () => {
  n = await startTestNats({ regions: ["x"] });
  nc = await connectNats(n.url, "shard-move", n.auth("admin"));
  jsm = await jetstreamManager(nc);
  js = jetstream(nc);
  await jsm.streams.add({ name: "SHARDS", subjects: ["s.>"], retention: RetentionPolicy.Workqueue });
  await jsm.consumers.add("SHARDS", cfg("v1", ["s.0", "s.1"]));
  await jsm.consumers.add("SHARDS", cfg("v2", ["s.2"]));
});
afterAll(async () => {
  await nc?.close();
  await n?.dispose();
});

async function drain(name: string): Promise<string[]> {
  const c = await js.consumers.get("SHARDS", name);
  const got: string[] = [];
  for (;;) {
    const m = await c.next({ expires: 1000 });
    if (!m) return got;
    got.push(m.string());
    m.ack();
  }
}

test("two consumers may not filter the same shard: the server refuses the overlap (one version per shard)", async () => {
  await expect(jsm.consumers.update("SHARDS", "v2", { filter_subjects: ["s.1", "s.2"] } as never)).rejects.toThrow(
    "filtered consumer not unique",
  );
});

test("a shard moves by shrinking the old consumer, then growing the new one; a message the old one holds unacked is delivered to the new one too", async () => {
  for (let i = 0; i < 3; i++) await js.publish("s.1", `m${i}`);
  const held = await (await js.consumers.get("SHARDS", "v1")).next({ expires: 2000 });
  expect(held?.string()).toBe("m0");
  await jsm.consumers.update("SHARDS", "v1", { filter_subjects: ["s.0"] } as never);
  await jsm.consumers.update("SHARDS", "v2", { filter_subjects: ["s.1", "s.2"] } as never);
  // m0 reaches v2 while v1 still holds it: two versions may hold one task at once after a move.
  // The Postgres lease (claim) and the provider-id checkpoint are what keep it paid once.
  expect(await drain("v2")).toEqual(["m0", "m1", "m2"]);
  held!.ack();
  await Bun.sleep(200);
  expect((await jsm.streams.info("SHARDS")).state.messages).toBe(0);
});

test("a paused consumer delivers nothing until resumed", async () => {
  await jsm.consumers.pause("SHARDS", "v2", new Date(Date.now() + 60_000));
  expect((await jsm.consumers.info("SHARDS", "v2")).paused).toBe(true);
  await js.publish("s.2", "p0");
  expect(await (await js.consumers.get("SHARDS", "v2")).next({ expires: 1000 })).toBeNull();
  await jsm.consumers.resume("SHARDS", "v2");
  expect(await drain("v2")).toEqual(["p0"]);
});

test("a consumer that gains a shard does not rewind: a message it scanned past is stranded until the consumer is reset (2.14+)", async () => {
  await jsm.streams.add({ name: "STRAND", subjects: ["t.>"], retention: RetentionPolicy.Workqueue });
  await jsm.consumers.add("STRAND", cfg("a", ["t.0"]));
  await jsm.consumers.add("STRAND", cfg("b", ["t.1"]));
  // b never pulls its message; a works through its own shard, scanning past b's message.
  await js.publish("t.1", "stranded");
  await js.publish("t.0", "own");
  const own = await (await js.consumers.get("STRAND", "a")).next({ expires: 2000 });
  expect(own?.string()).toBe("own");
  own!.ack();
  await Bun.sleep(100);
  // t.1 moves from b to a: a's filters grow, but it does not go back for the message.
  await jsm.consumers.update("STRAND", "b", { filter_subjects: ["t.idle"] } as never);
  await jsm.consumers.update("STRAND", "a", { filter_subjects: ["t.0", "t.1"] } as never);
  expect(await (await js.consumers.get("STRAND", "a")).next({ expires: 1000 })).toBeNull();
  expect((await jsm.streams.info("STRAND")).state.messages).toBe(1);
  // The reset to the oldest message left delivers it (what reconcileConsumers does after a grow).
  const si = await jsm.streams.info("STRAND");
  await jsm.consumers.reset("STRAND", "a", si.state.first_seq);
  const m = await (await js.consumers.get("STRAND", "a")).next({ expires: 2000 });
  expect(m?.string()).toBe("stranded");
  m!.ack();
});
