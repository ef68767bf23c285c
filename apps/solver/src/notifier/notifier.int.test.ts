// The callback notifier on a real EVENTS stream and a real Postgres: a final-state event of a
// task with a callback URL becomes one webhook_deliveries row; every other event is acked without
// a row, and (issue 13: the notifier was a third of the solver's CPU per task) without reading
// the task when the event already says there is nothing to record: a non-final kind (from the
// subject) or `data.callback: false`.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { AckPolicy, DeliverPolicy, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { nanos } from "@nats-io/transport-node";
import {
  createTestDatabase,
  eventually,
  startTestNats,
  type TestDatabase,
  type TestNats,
} from "@pipeline/devstack/testing";
import { type Database, openDatabase, tasks, webhookDeliveries } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import {
  connectNats,
  ensureConsumer,
  ensureNotifierConsumer,
  ensureNotifierConsumers,
  ensureStreams,
  legacyNotifierConsumer,
  notifierConsumerConfig,
  notifierConsumerNames,
  notifierHooksConsumerConfig,
  resumePoint,
} from "@pipeline/shared/nats";
import { eventSubject, hookEventSubject, streams, subjectOfEvent } from "@pipeline/shared/subjects";
import { createDeliveryStore } from "../adapters/deliveries.ts";
import { createEventSink } from "../adapters/nats.ts";
import { createNotifier } from "./notifier.ts";

const REGION = "nt";
const MIGRATING = "nm"; // a region whose EVENTS has the previous version's notifier consumer
let nats: TestNats;
let nc: NatsConnection;
let jsm: JetStreamManager;
let tdb: TestDatabase;
let database: Database;
beforeAll(async () => {
  nats = await startTestNats({ regions: [REGION, MIGRATING] });
  nc = await connectNats(nats.url, "notifier-test", nats.auth("admin"));
  jsm = await jetstreamManager(nc);
  await ensureStreams(jsm, { region: REGION });
  await ensureNotifierConsumer(jsm, REGION);
  tdb = await createTestDatabase("notifier");
  database = openDatabase(tdb.url, { max: 4 });
});
afterAll(async () => {
  await database?.close();
  await tdb?.drop();
  await nc?.close();
  await nats?.dispose();
});

/** Runs a notifier on the region's consumer until it has finished every event up to stream sequence `lastSeq`. */
async function runNotifier(
  region: string,
  store: Parameters<typeof createNotifier>[0]["store"],
  lastSeq: number,
): Promise<void> {
  const name = notifierConsumerConfig(region).durable_name;
  const notifier = createNotifier({
    consumer: await jetstream(nc).consumers.get(streams.events(region), name),
    store,
    retryBaseMs: 200,
    concurrency: 4,
    log: createLogger("notifier-test", { level: "error" }),
  });
  notifier.start();
  try {
    await eventually(async () => {
      const ci = await jsm.consumers.info(streams.events(region), name);
      return ci.num_pending === 0 && ci.num_ack_pending === 0 && ci.delivered.stream_seq === lastSeq;
    }, 10_000);
  } finally {
    await notifier.stop();
  }
}

async function task(
  state: "completed" | "failed" | "queued",
  callbackUrl: string | null,
  region = REGION,
): Promise<string> {
  const id = randomUUID();
  await database.db.insert(tasks).values({
    id,
    owner: "tenant-n",
    requestHash: "h",
    region,
    type: "turnstile",
    priority: "normal",
    params: {},
    state,
    callbackUrl,
    redrives: state === "queued" ? 1 : 0,
  });
  return id;
}

test("final-state events with a callback become deliveries; the rest are acked, most without a read", async () => {
  const store = createDeliveryStore(database.db);
  const reads: string[] = [];
  const counted = { ...store, callbackTarget: (id: string) => (reads.push(id), store.callbackTarget(id)) };
  const withCallback = await task("completed", "https://hooks.example.com/a");
  const saysNone = await task("completed", null);
  const failedUnflagged = await task("failed", "https://hooks.example.com/d");
  const redriven = await task("queued", "https://hooks.example.com/e"); // its `completed` event is old news
  const js = jetstream(nc);
  const publish = (kind: string, body: unknown) =>
    js.publish(eventSubject(REGION, kind), typeof body === "string" ? body : JSON.stringify(body));
  const ev = (taskId: string, kind: string, data: Record<string, unknown> = {}) => ({
    taskId,
    kind,
    state: kind,
    version: 1,
    region: REGION,
    at: new Date().toISOString(),
    data,
  });
  await publish("accepted", ev(withCallback, "accepted", { callbackUrl: "https://hooks.example.com/a" }));
  await publish("solving", ev(withCallback, "solving"));
  await publish("submitted", ev(withCallback, "submitted"));
  await publish("breaker_opened", { kind: "breaker_opened", region: REGION, data: {} });
  await publish("completed", ev(withCallback, "completed", { tokenStored: true, callback: true }));
  await publish("completed", ev(saysNone, "completed", { tokenStored: true, callback: false }));
  await publish("failed", ev(failedUnflagged, "failed", { code: "ERROR_CAPTCHA_UNSOLVABLE" })); // a writer that does not say
  await publish("completed", ev(redriven, "completed", { tokenStored: true, callback: true }));
  await publish("completed", "not json");

  // Only the final-state events reach the consumer (five of the nine).
  await runNotifier(REGION, counted, 9);
  expect(
    (await jsm.consumers.info(streams.events(REGION), notifierConsumerConfig(REGION).durable_name)).delivered
      .consumer_seq,
  ).toBe(5);
  const rows = await database.db.select().from(webhookDeliveries);
  expect(rows.map((r) => r.deliveryId).sort()).toEqual(
    [`${failedUnflagged}:failed:0`, `${withCallback}:completed:0`].sort(),
  );
  expect(rows.find((r) => r.taskId === withCallback)).toMatchObject({
    state: "completed",
    owner: "tenant-n",
    host: "hooks.example.com",
    status: "pending",
  });
  // Read: the final events that said there is a callback, or said nothing. Not read: the
  // non-final ones, `callback: false`, the unparsable one.
  expect(reads.sort()).toEqual([withCallback, failedUnflagged, redriven].sort());
});

test("resumePoint: after the legacy consumer's acknowledged floor, or after the stream's last message when it left nothing", () => {
  expect(resumePoint({ ack_floor: { stream_seq: 40 }, num_pending: 3, num_ack_pending: 2 }, 50)).toBe(41);
  expect(resumePoint({ ack_floor: { stream_seq: 40 }, num_pending: 0, num_ack_pending: 0 }, 40)).toBe(41);
  // Nothing acknowledged ever: its unfinished messages are the stream's last ones.
  expect(resumePoint({ ack_floor: { stream_seq: 0 }, num_pending: 4, num_ack_pending: 1 }, 12)).toBe(8);
  expect(resumePoint({ ack_floor: { stream_seq: 0 }, num_pending: 0, num_ack_pending: 0 }, 12)).toBe(13);
});

test("upgrading beside the previous version's consumer: this version starts where that one's acknowledgements end", async () => {
  await ensureStreams(jsm, { region: MIGRATING });
  const stream = streams.events(MIGRATING);
  // The previous version's consumer, as it made it: every event of the region, from its creation on.
  await ensureConsumer(jsm, stream, {
    durable_name: legacyNotifierConsumer(MIGRATING),
    filter_subject: `events.${MIGRATING}.*`,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.New,
    ack_wait: nanos(30_000),
    max_deliver: -1,
    max_ack_pending: 1000,
  });
  const done = await task("completed", "https://hooks.example.com/done", MIGRATING);
  const unfinished = await task("completed", "https://hooks.example.com/left", MIGRATING);
  const later = await task("completed", "https://hooks.example.com/later", MIGRATING);
  const js = jetstream(nc);
  const ev = (taskId: string, kind: string) =>
    JSON.stringify({
      taskId,
      kind,
      state: kind,
      version: 1,
      region: MIGRATING,
      at: new Date().toISOString(),
      data: { tokenStored: true },
    });
  await js.publish(eventSubject(MIGRATING, "completed"), ev(done, "completed")); // 1: finished by the old solver
  await js.publish(eventSubject(MIGRATING, "accepted"), ev(unfinished, "accepted")); // 2
  await js.publish(eventSubject(MIGRATING, "completed"), ev(unfinished, "completed")); // 3: delivered to the old solver, never acked (it stopped)
  const legacy = await js.consumers.get(stream, legacyNotifierConsumer(MIGRATING));
  const first = await legacy.next({ expires: 2000 });
  expect(first?.seq).toBe(1);
  await first!.ackAck();
  const batch = await legacy.fetch({ max_messages: 2, expires: 2000 });
  for await (const m of batch) expect([2, 3]).toContain(m.seq);

  // The provisioning of this version (the recovery service at start, as its NATS user: the
  // solver's may not create a consumer on EVENTS): the consumer starts after the legacy one's floor (1).
  const recoveryNc = await connectNats(nats.url, "notifier-test-recovery", nats.auth("recovery"));
  try {
    await ensureNotifierConsumer(await jetstreamManager(recoveryNc), MIGRATING);
  } finally {
    await recoveryNc.close();
  }
  const ci = await jsm.consumers.info(stream, notifierConsumerConfig(MIGRATING).durable_name);
  expect(ci.config).toMatchObject({
    deliver_policy: DeliverPolicy.StartSequence,
    opt_start_seq: 2,
    filter_subjects: notifierConsumerConfig(MIGRATING).filter_subjects,
  });
  // A second solver (or a restart) keeps that start, whatever the legacy consumer holds now.
  await ensureNotifierConsumer(jsm, MIGRATING);
  expect((await jsm.consumers.info(stream, notifierConsumerConfig(MIGRATING).durable_name)).config.opt_start_seq).toBe(
    2,
  );
  await js.publish(eventSubject(MIGRATING, "completed"), ev(later, "completed")); // 4

  const store = createDeliveryStore(database.db);
  await runNotifier(MIGRATING, store, 4);
  const rows = await database.db.select().from(webhookDeliveries);
  // The event the old solver left unfinished is recorded; the one it finished is not read again.
  expect(
    rows
      .filter((r) => [done, unfinished, later].includes(r.taskId))
      .map((r) => r.deliveryId)
      .sort(),
  ).toEqual([`${later}:completed:0`, `${unfinished}:completed:0`].sort());
});

test("a fresh install reads the hooks consumer only: a final event without a callback reaches no notifier, one with a callback (published by the solver's event sink, or on its hook subject by another writer) is recorded", async () => {
  const FRESH = "nh";
  const fresh = await startTestNats({ regions: [FRESH] });
  const fnc = await connectNats(fresh.url, "notifier-hooks-test", fresh.auth("admin"));
  try {
    const fjsm = await jetstreamManager(fnc);
    await ensureStreams(fjsm, { region: FRESH });
    // Made as the recovery service's user (its provisioning at start), read as the solver's, as the solver does at start.
    const recoveryNc = await connectNats(fresh.url, "notifier-hooks-recovery", fresh.auth("recovery"));
    const solverNc = await connectNats(fresh.url, "notifier-hooks-solver", fresh.auth("solver"));
    let names: string[];
    try {
      names = await ensureNotifierConsumers(await jetstreamManager(recoveryNc), FRESH);
      // A second provisioning: the same answer, nothing changed; the solver reads the same names.
      expect(await ensureNotifierConsumers(await jetstreamManager(recoveryNc), FRESH)).toEqual(names);
      expect(await notifierConsumerNames(await jetstreamManager(solverNc), FRESH)).toEqual(names);
      // The solver's user cannot make a notifier consumer itself.
      await expect(
        (await jetstreamManager(solverNc)).consumers.add(streams.events(FRESH), notifierConsumerConfig(FRESH)),
      ).rejects.toThrow(/permissions violation/i);
    } finally {
      await Promise.all([recoveryNc.close(), solverNc.close()]);
    }
    const hooks = notifierHooksConsumerConfig(FRESH).durable_name;
    expect(names).toEqual([hooks]);
    expect((await fjsm.consumers.list(streams.events(FRESH)).next()).map((c) => c.name)).toEqual([hooks]);

    const withCallback = await task("completed", "https://hooks.example.com/h", FRESH);
    const without = await task("completed", null, FRESH);
    const failed = await task("failed", "https://hooks.example.com/c", FRESH);
    const sink = createEventSink(jetstream(fnc), FRESH, (err) => {
      throw err;
    });
    await sink.publish({
      taskId: without,
      kind: "completed",
      state: "completed",
      version: 3,
      data: { tokenStored: true, callback: false },
    });
    await sink.publish({
      taskId: withCallback,
      kind: "completed",
      state: "completed",
      version: 3,
      data: { tokenStored: true, callback: true },
    });
    await sink.publish({ taskId: without, kind: "solving", state: "solving", version: 1 });
    // Another writer using subjectOfEvent, as the gateway's adapter does for its cancelled events.
    await jetstream(fnc).publish(
      subjectOfEvent(FRESH, { kind: "failed", data: { callback: true } }),
      JSON.stringify({
        taskId: failed,
        kind: "failed",
        state: "failed",
        version: 2,
        region: FRESH,
        at: new Date().toISOString(),
        data: { callback: true },
      }),
    );
    const last = (await fjsm.streams.info(streams.events(FRESH))).state.last_seq;
    expect(last).toBe(4);
    expect((await fjsm.streams.getMessage(streams.events(FRESH), { seq: 2 }))!.subject).toBe(
      hookEventSubject(FRESH, "completed"),
    );

    const notifier = createNotifier({
      consumer: await jetstream(fnc).consumers.get(streams.events(FRESH), hooks),
      store: createDeliveryStore(database.db),
      retryBaseMs: 200,
      concurrency: 4,
      log: createLogger("notifier-test", { level: "error" }),
    });
    notifier.start();
    try {
      await eventually(async () => {
        const ci = await fjsm.consumers.info(streams.events(FRESH), hooks);
        return ci.num_pending === 0 && ci.num_ack_pending === 0 && ci.delivered.stream_seq === 4;
      }, 10_000);
    } finally {
      await notifier.stop();
    }
    // Two of the four events were delivered: the two with a callback.
    expect((await fjsm.consumers.info(streams.events(FRESH), hooks)).delivered.consumer_seq).toBe(2);
    const rows = await database.db.select().from(webhookDeliveries);
    expect(rows.map((r) => r.deliveryId)).toEqual(
      expect.arrayContaining([`${withCallback}:completed:0`, `${failed}:failed:0`]),
    );
    expect(rows.some((r) => r.taskId === without)).toBe(false);
  } finally {
    await fnc.close();
    await fresh.dispose();
  }
});

test("beside the previous version's final-events consumer, a solver reads both (what an earlier gateway or solver still publishes on the plain subjects)", async () => {
  expect(await ensureNotifierConsumers(jsm, REGION)).toEqual([
    notifierHooksConsumerConfig(REGION).durable_name,
    notifierConsumerConfig(REGION).durable_name,
  ]);
  const solverNc = await connectNats(nats.url, "notifier-both-solver", nats.auth("solver"));
  try {
    expect(await notifierConsumerNames(await jetstreamManager(solverNc), REGION)).toEqual([
      notifierHooksConsumerConfig(REGION).durable_name,
      notifierConsumerConfig(REGION).durable_name,
    ]);
  } finally {
    await solverNc.close();
  }
});
