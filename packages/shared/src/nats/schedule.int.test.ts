import { afterAll, beforeAll, expect, test } from "bun:test";
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType } from "@nats-io/jetstream";
import { startTestNats, type TestNats } from "@pipeline/devstack/testing";
import { laneFilter, scheduleSubject, shardOf, streams, taskSubject } from "../subjects.ts";
import { connectNats, type NatsConnection } from "./connection.ts";
import { createPubAckPublisher } from "./pub-acks.ts";
import { publishScheduledTask } from "./publish.ts";
import { ensureStreams } from "./topology.ts";
import { unscheduleTask } from "./unschedule.ts";

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

test("unscheduleTask removes a held message at once; its lane copy arrives now; a missing schedule is no error", async () => {
  const jsm = await jetstreamManager(nc);
  const consumer = await jetstream(nc).consumers.get(streams.tasks(region), "lane_normal");
  const js = createPubAckPublisher(nc);
  const msg = { id: "0190a000-0000-7000-8000-0000000000bb", type: "turnstile" as const, priority: "normal" as const };
  const subject = scheduleSubject(region, msg.id);
  const held = async () =>
    (await jsm.streams.info(streams.tasks(region), { subjects_filter: subject })).state.subjects?.[subject] ?? 0;
  await publishScheduledTask(js, region, msg, new Date(Date.now() + 60_000));
  expect(await held()).toBe(1);
  await unscheduleTask(js, region, msg);
  expect(await held()).toBe(0);
  // The copy the removal published: on the lane now (a solver finds the row final and acks it).
  const m = await consumer.next({ expires: 3000 });
  expect(m?.json()).toEqual(msg);
  m!.ack();
  // Again (the schedule gone): no error, one more copy, deduplicated by its Nats-Msg-Id.
  expect((await unscheduleTask(js, region, msg)).duplicate).toBe(true);
  const other = { ...msg, id: "0190a000-0000-7000-8000-0000000000cc" };
  expect((await unscheduleTask(js, region, other)).duplicate).toBe(false);
  const copy = await consumer.next({ expires: 3000 });
  expect(copy?.json()).toEqual(other);
  copy!.ack();
  expect(await consumer.next({ expires: 1000 })).toBeNull();
  js.close();
});
