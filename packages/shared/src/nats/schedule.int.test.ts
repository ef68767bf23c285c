import { afterAll, beforeAll, expect, test } from "bun:test";
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { startTestNats, type TestNats } from "@pipeline/devstack/testing";
import { laneFilter, scheduleSubject, shardOf, streams, taskSubject } from "../subjects.ts";
import { connectNats, type NatsConnection } from "./connection.ts";
import { createPubAckPublisher } from "./pub-acks.ts";
import { publishScheduledTask } from "./publish.ts";
import { ensureStreams } from "./topology.ts";

// Message schedules on the WorkQueue TASKS stream (docs/scheduling.md): a held message on
// tasks.<region>.scheduled.<id> is put on its lane by the server at its time, not before.
let nats: TestNats;
let nc: NatsConnection;
const region = "sched";

beforeAll(async () => {
  nats = await startTestNats({ regions: [region] });
  nc = await connectNats(nats.url, "schedule-test", nats.auth("admin"));
});
afterAll(async () => {
  await nc?.close();
  await nats?.dispose();
});

test("an existing TASKS stream (with messages) gets allow_msg_schedules on upgrade", async () => {
  const jsm = await jetstreamManager(nc);
  // TASKS as an older release made it: no allow_msg_schedules, one message in it.
  await jsm.streams.add({
    name: streams.tasks(region),
    subjects: [`tasks.${region}.>`],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
  });
  await jetstream(nc).publish(taskSubject(region, "low", 0), "{}", { msgID: "old" });
  await ensureStreams(jsm, { region });
  const info = await jsm.streams.info(streams.tasks(region));
  expect((info.config as { allow_msg_schedules?: boolean }).allow_msg_schedules).toBe(true);
  expect(info.state.messages).toBe(1);
});

test("a scheduled task message reaches its lane at its time, not before, and only once", async () => {
  const jsm = await jetstreamManager(nc);
  const lane = "normal" as const;
  await jsm.consumers.add(streams.tasks(region), {
    durable_name: "lane_normal",
    filter_subject: laneFilter(region, lane),
    ack_policy: AckPolicy.Explicit,
  });
  const consumer = await jetstream(nc).consumers.get(streams.tasks(region), "lane_normal");
  const js = createPubAckPublisher(nc);
  const msg = { id: "0190a000-0000-7000-8000-0000000000aa", type: "turnstile" as const, priority: lane };
  const at = new Date(Date.now() + 2500);
  const first = await publishScheduledTask(js, region, msg, at);
  // The same schedule again (a replayed submit): deduplicated.
  const again = await publishScheduledTask(js, region, msg, at);
  expect(again.duplicate).toBe(true);
  expect(first.duplicate).toBe(false);
  // Held: nothing on the lane yet, the held message on its own subject.
  expect(await consumer.next({ expires: 1500 })).toBeNull();
  const held = await jsm.streams.getMessage(streams.tasks(region), { last_by_subj: scheduleSubject(region, msg.id) });
  expect(held?.json()).toEqual(msg);
  const m = await consumer.next({ expires: 5000 });
  const arrived = Date.now();
  expect(m).not.toBeNull();
  expect(m!.subject).toBe(taskSubject(region, lane, shardOf(msg.id)));
  expect(m!.json()).toEqual(msg);
  expect(arrived).toBeGreaterThanOrEqual(at.getTime() - 50);
  expect(arrived - at.getTime()).toBeLessThan(1500);
  m!.ack();
  expect(await consumer.next({ expires: 1500 })).toBeNull();
  js.close();
});
