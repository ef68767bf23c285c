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
  ensureStreams,
  notifierConsumerName,
  notifierHooksConsumerConfig,
} from "@pipeline/shared/nats";
import { eventSubject, FINAL_EVENT_KINDS, hookEventSubject, streams, subjectOfEvent } from "@pipeline/shared/subjects";
import { createDeliveryStore } from "../adapters/deliveries.ts";
import { createEventSink } from "../adapters/nats.ts";
import { createNotifier } from "./notifier.ts";

const REGION = "nt";
/**
 * A consumer made by hand on the plain subjects of the final events (not the hook subjects the
 * notifier's own consumer filters on): what the notifier does with events whose subject or
 * `data.callback` already says there is nothing to record.
 */
const byHand = {
  durable_name: `by_hand_${REGION}`,
  filter_subjects: FINAL_EVENT_KINDS.map((k) => eventSubject(REGION, k)),
  ack_policy: AckPolicy.Explicit,
  deliver_policy: DeliverPolicy.All,
  ack_wait: nanos(30_000),
  max_deliver: -1,
};
let nats: TestNats;
let nc: NatsConnection;
let jsm: JetStreamManager;
let tdb: TestDatabase;
let database: Database;
beforeAll(async () => {
  nats = await startTestNats({ regions: [REGION] });
  nc = await connectNats(nats.url, "notifier-test", nats.auth("admin"));
  jsm = await jetstreamManager(nc);
  await ensureStreams(jsm, { region: REGION });
  await ensureConsumer(jsm, streams.events(REGION), byHand);
  tdb = await createTestDatabase("notifier");
  database = openDatabase(tdb.url, { max: 4 });
});
afterAll(async () => {
  await database?.close();
  await tdb?.drop();
  await nc?.close();
  await nats?.dispose();
});

/** Runs a notifier on the consumer made by hand until it has finished every event up to stream sequence `lastSeq`. */
async function runNotifier(store: Parameters<typeof createNotifier>[0]["store"], lastSeq: number): Promise<void> {
  const [region, name] = [REGION, byHand.durable_name];
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
  await runNotifier(counted, 9);
  expect((await jsm.consumers.info(streams.events(REGION), byHand.durable_name)).delivered.consumer_seq).toBe(5);
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

test("the notifier reads the hooks consumer: a final event without a callback reaches no notifier, one with a callback (published by the solver's event sink, or on its hook subject by another writer) is recorded", async () => {
  const FRESH = "nh";
  const fresh = await startTestNats({ regions: [FRESH] });
  const fnc = await connectNats(fresh.url, "notifier-hooks-test", fresh.auth("admin"));
  try {
    const fjsm = await jetstreamManager(fnc);
    await ensureStreams(fjsm, { region: FRESH });
    // Made as the recovery service's user (its provisioning at start), read as the solver's, as the solver does at start.
    const recoveryNc = await connectNats(fresh.url, "notifier-hooks-recovery", fresh.auth("recovery"));
    const solverNc = await connectNats(fresh.url, "notifier-hooks-solver", fresh.auth("solver"));
    let name: string;
    try {
      name = await ensureNotifierConsumer(await jetstreamManager(recoveryNc), FRESH);
      // A second provisioning: the same answer, nothing changed; the solver reads the same name.
      expect(await ensureNotifierConsumer(await jetstreamManager(recoveryNc), FRESH)).toBe(name);
      expect(await notifierConsumerName(await jetstreamManager(solverNc), FRESH)).toBe(name);
      // The solver's user cannot make a notifier consumer itself.
      await expect(
        (await jetstreamManager(solverNc)).consumers.add(streams.events(FRESH), {
          ...notifierHooksConsumerConfig(FRESH),
          durable_name: `by_hand_${FRESH}`,
        }),
      ).rejects.toThrow(/permissions violation/i);
    } finally {
      await Promise.all([recoveryNc.close(), solverNc.close()]);
    }
    const hooks = notifierHooksConsumerConfig(FRESH).durable_name;
    expect(name).toBe(hooks);
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
