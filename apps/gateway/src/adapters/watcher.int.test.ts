// The long-poll watcher on a real nats-server, as the gateway's NATS user: with nobody waiting the
// gateway receives none of the region's events (issue 13: four per task were delivered and parsed
// for nobody); a wait is woken by its task's event; an event stored before the server had the
// subscription is not lost to a waiter (it is woken once the subscription is in place and
// re-reads); the subscription closes after the linger.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type JetStreamClient, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { eventually, startTestNats, type TestNats } from "@pipeline/devstack/testing";
import { connectNats, ensureStreams, type NatsConnection } from "@pipeline/shared/nats";
import { eventSubject } from "@pipeline/shared/subjects";
import { createTaskWatcher } from "./nats.ts";

const REGION = "gwwatch";
let nats: TestNats;
let admin: NatsConnection;
let gw: NatsConnection;
let js: JetStreamClient;

beforeAll(async () => {
  nats = await startTestNats({ regions: [REGION] });
  admin = await connectNats(nats.url, "gwwatch-admin", nats.auth("admin"));
  await ensureStreams(await jetstreamManager(admin), { region: REGION });
  js = jetstream(admin);
  gw = await connectNats(nats.url, "gwwatch-gateway", nats.auth("gateway"));
}, 30_000);
afterAll(async () => {
  await gw?.close();
  await admin?.close();
  await nats?.dispose();
});

const event = (taskId: string, kind = "completed") =>
  js.publish(
    eventSubject(REGION, kind),
    JSON.stringify({ taskId, kind, state: kind, version: 3, region: REGION, at: new Date().toISOString() }),
  );

test("nobody waiting: no event reaches the gateway; a wait is woken by its own task's event, not another's", async () => {
  const watcher = createTaskWatcher(gw, REGION, { lingerMs: 60_000 });
  try {
    await gw.flush();
    const before = gw.stats().inMsgs;
    for (let i = 0; i < 20; i++) await event(crypto.randomUUID());
    await gw.flush();
    expect(watcher.listening()).toBe(false);
    expect(gw.stats().inMsgs - before).toBe(0);

    const id = crypto.randomUUID();
    const w = watcher.watch(id);
    expect(watcher.listening()).toBe(true);
    // The wake once the subscription is in place (the task is re-read), then a real wait.
    expect(await w.wait(5_000)).toBe("event");
    const waiting = w.wait(10_000);
    await event(crypto.randomUUID());
    const t0 = Date.now();
    await event(id);
    expect(await waiting).toBe("event");
    expect(Date.now() - t0).toBeLessThan(2_000);
    // As the apps publish a task's events: Nats-Msg-Id `<task id>:<version>:<kind>`, read without
    // parsing the body (this one has no taskId at all).
    const byHeader = w.wait(10_000);
    await js.publish(eventSubject(REGION, "submitted"), "not json", { msgID: `${id}:2:submitted` });
    expect(await byHeader).toBe("event");
    w.close();
    expect(watcher.size()).toBe(0);
  } finally {
    watcher.close();
  }
});

test("an event stored before the server had the subscription still wakes the waiter (re-read), and the subscription closes after the linger", async () => {
  const watcher = createTaskWatcher(gw, REGION, { lingerMs: 200 });
  try {
    const id = crypto.randomUUID();
    // Published by another connection at the same moment as the watch starts: whichever the
    // server sees first, the wait ends at once instead of at the caller's re-check interval.
    const [w] = await Promise.all([Promise.resolve(watcher.watch(id)), event(id)]);
    const t0 = Date.now();
    expect(await w.wait(10_000)).toBe("event");
    expect(Date.now() - t0).toBeLessThan(2_000);
    w.close();
    // A second wait within the linger reuses the subscription.
    const again = watcher.watch(id);
    expect(watcher.listening()).toBe(true);
    again.close();
    await eventually(async () => !watcher.listening(), 5_000, 20);
    await gw.flush();
    const before = gw.stats().inMsgs;
    await event(id);
    await gw.flush();
    expect(gw.stats().inMsgs - before).toBe(0);
  } finally {
    watcher.close();
  }
});

test("a long-poll's watch (finalOnly) is woken by its task's final events (plain or .hook subject), not by the events on the way there; a stream's by all", async () => {
  const watcher = createTaskWatcher(gw, REGION, { lingerMs: 60_000 });
  try {
    const id = crypto.randomUUID();
    const poll = watcher.watch(id, { finalOnly: true });
    const stream = watcher.watch(id);
    // The wake once the subscription is in place reaches both.
    expect(await poll.wait(5_000)).toBe("event");
    expect(await stream.wait(5_000)).toBe("event");
    const publish = (kind: string, version: number, subject = eventSubject(REGION, kind)) =>
      js.publish(
        subject,
        JSON.stringify({ taskId: id, kind, state: "solving", version, region: REGION, at: new Date().toISOString() }),
        { msgID: `${id}:${version}:${kind}` },
      );
    for (const [kind, version] of [
      ["accepted", 0],
      ["solving", 1],
      ["submitted", 1],
      ["retrying", 2],
    ] as const) {
      const s = stream.wait(5_000);
      const p = poll.wait(300);
      await publish(kind, version);
      expect(await s).toBe("event");
      expect(await p).toBe("timeout");
    }
    // A final event on the callback notifier's subject (`events.<region>.completed.hook`).
    let p = poll.wait(5_000);
    await publish("completed", 3, `${eventSubject(REGION, "completed")}.hook`);
    expect(await p).toBe("event");
    for (const kind of ["failed", "cancelled"]) {
      p = poll.wait(5_000);
      await publish(kind, 4);
      expect(await p).toBe("event");
    }
    // An adoption is not final: the long-poll sleeps on; its final event, published under an id
    // of another form (the task id then read from the body), wakes it.
    p = poll.wait(300);
    await js.publish(
      eventSubject(REGION, "adopted"),
      JSON.stringify({
        taskId: id,
        kind: "adopted",
        state: "queued",
        version: 5,
        region: REGION,
        at: new Date().toISOString(),
      }),
      { msgID: `adopted:${id}:1` },
    );
    expect(await p).toBe("timeout");
    p = poll.wait(5_000);
    await js.publish(
      eventSubject(REGION, "completed"),
      JSON.stringify({
        taskId: id,
        kind: "completed",
        state: "completed",
        version: 6,
        region: REGION,
        at: new Date().toISOString(),
      }),
      { msgID: `other-form:${id}` },
    );
    expect(await p).toBe("event");
    poll.close();
    stream.close();
  } finally {
    watcher.close();
  }
});
