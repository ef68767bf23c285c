// The callback notifier on a real EVENTS stream and a real Postgres: a final-state event of a
// task with a callback URL becomes one webhook_deliveries row; every other event is acked without
// a row, and (issue 13: the notifier was a third of the solver's CPU per task) without reading
// the task when the event already says there is nothing to record: a non-final kind (from the
// subject) or `data.callback: false`.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { openDatabase, tasks, webhookDeliveries, type Database } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, ensureConsumer, ensureStreams, notifierConsumerConfig } from "@pipeline/shared/nats";
import { eventSubject, streams } from "@pipeline/shared/subjects";
import { createTestDatabase, eventually, startTestNats, type TestDatabase, type TestNats } from "@pipeline/shared/testing";
import { createDeliveryStore } from "../adapters/deliveries.ts";
import { createNotifier } from "./notifier.ts";

const REGION = "nt";
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
  await ensureConsumer(jsm, streams.events(REGION), notifierConsumerConfig(REGION));
  tdb = await createTestDatabase("notifier");
  database = openDatabase(tdb.url, { max: 4 });
});
afterAll(async () => {
  await database?.close();
  await tdb?.drop();
  await nc?.close();
  await nats?.dispose();
});

async function task(state: "completed" | "failed" | "queued", callbackUrl: string | null): Promise<string> {
  const id = randomUUID();
  await database.db.insert(tasks).values({ id, owner: "tenant-n", requestHash: "h", region: REGION, type: "turnstile", priority: "normal", params: {}, state, callbackUrl, redrives: state === "queued" ? 1 : 0 });
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
  const publish = (kind: string, body: unknown) => js.publish(eventSubject(REGION, kind), typeof body === "string" ? body : JSON.stringify(body));
  const ev = (taskId: string, kind: string, data: Record<string, unknown> = {}) => ({ taskId, kind, state: kind, version: 1, region: REGION, at: new Date().toISOString(), data });
  await publish("accepted", ev(withCallback, "accepted", { callbackUrl: "https://hooks.example.com/a" }));
  await publish("solving", ev(withCallback, "solving"));
  await publish("submitted", ev(withCallback, "submitted"));
  await publish("breaker_opened", { kind: "breaker_opened", region: REGION, data: {} });
  await publish("completed", ev(withCallback, "completed", { tokenStored: true, callback: true }));
  await publish("completed", ev(saysNone, "completed", { tokenStored: true, callback: false }));
  await publish("failed", ev(failedUnflagged, "failed", { code: "ERROR_CAPTCHA_UNSOLVABLE" })); // a writer that does not say
  await publish("completed", ev(redriven, "completed", { tokenStored: true, callback: true }));
  await publish("completed", "not json");

  const notifier = createNotifier({
    consumer: await jetstream(nc).consumers.get(streams.events(REGION), notifierConsumerConfig(REGION).durable_name),
    store: counted,
    retryBaseMs: 200,
    concurrency: 4,
    log: createLogger("notifier-test", { level: "error" }),
  });
  notifier.start();
  try {
    const name = notifierConsumerConfig(REGION).durable_name;
    await eventually(async () => {
      const ci = await jsm.consumers.info(streams.events(REGION), name);
      return ci.num_pending === 0 && ci.num_ack_pending === 0 && ci.delivered.stream_seq === 9;
    }, 10_000);
  } finally {
    await notifier.stop();
  }
  const rows = await database.db.select().from(webhookDeliveries);
  expect(rows.map((r) => r.deliveryId).sort()).toEqual([`${failedUnflagged}:failed:0`, `${withCallback}:completed:0`].sort());
  expect(rows.find((r) => r.taskId === withCallback)).toMatchObject({ state: "completed", owner: "tenant-n", host: "hooks.example.com", status: "pending" });
  // Read: the final events that said there is a callback, or said nothing. Not read: the
  // non-final ones, `callback: false`, the unparsable one.
  expect(reads.sort()).toEqual([withCallback, failedUnflagged, redriven].sort());
});
