// A cancelled task's final event, as the gateway publishes it: on the hook subject
// (`events.<region>.cancelled.hook`, the callback notifier's) when the task has a callback URL,
// on `events.<region>.cancelled` otherwise (issue 13: no notifier receives the final event of a
// task without a callback).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { openDatabase, type Database } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, ensureStreams, type NatsConnection } from "@pipeline/shared/nats";
import { eventSubject, hookEventSubject, streams } from "@pipeline/shared/subjects";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/shared/testing";
import { createTaskQueue, createTaskWatcher } from "../adapters/nats.ts";
import { createTaskStore } from "../adapters/pg.ts";
import { createApiKeys } from "../domain/api-keys.ts";
import { createApp } from "../http/app.ts";

const REGION = "gwcancel";
let nats: TestNats;
let tdb: TestDatabase;
let admin: NatsConnection;
let gw: NatsConnection;
let jsm: JetStreamManager;
let database: Database;
let app: ReturnType<typeof createApp>;

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats({ regions: [REGION] }), createTestDatabase("gwcancel")]);
  admin = await connectNats(nats.url, "gwcancel-admin", nats.auth("admin"));
  jsm = await jetstreamManager(admin);
  await ensureStreams(jsm, { region: REGION });
  gw = await connectNats(nats.url, "gwcancel-gateway", nats.auth("gateway"));
  database = openDatabase(tdb.url, { max: 5 });
  app = createApp({
    config: { REGION, MAX_BODY_BYTES: 64 * 1024, IMAGE_MAX_BYTES: 4096, MAX_WAIT_SECONDS: 5, TASK_DEADLINE_MS: 600_000 },
    store: createTaskStore(database.db),
    queue: createTaskQueue(gw, REGION, 2000),
    watcher: createTaskWatcher(gw, REGION),
    apiKeys: createApiKeys(["client-a-key"]),
    log: createLogger("gwcancel-test", { level: "silent" }),
  });
}, 30_000);
afterAll(async () => {
  await gw?.close();
  await admin?.close();
  await database?.close();
  await Promise.all([nats?.dispose(), tdb?.drop()]);
});

const headers = { authorization: "Bearer client-a-key", "content-type": "application/json" };

async function submitAndCancel(callbackUrl?: string): Promise<string> {
  const res = await app.request("/v1/tasks", {
    method: "POST",
    headers,
    body: JSON.stringify({ type: "turnstile", params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/cancel" }, ...(callbackUrl ? { callbackUrl } : {}) }),
  });
  expect(res.status).toBe(202);
  const { id } = (await res.json()) as { id: string };
  const del = await app.request(`/v1/tasks/${id}`, { method: "DELETE", headers });
  expect(del.status).toBe(200);
  expect(((await del.json()) as { status: string }).status).toBe("cancelled");
  return id;
}

test("a task with a callback URL: its cancelled event on the hook subject; without one: on the plain subject", async () => {
  const hooked = await submitAndCancel("https://hooks.example.com/cancelled");
  const plain = await submitAndCancel();
  const onHook = await jsm.streams.getMessage(streams.events(REGION), { last_by_subj: hookEventSubject(REGION, "cancelled") });
  expect(onHook!.json<{ taskId: string; kind: string; data: { callback: boolean } }>()).toMatchObject({ taskId: hooked, kind: "cancelled", data: { callback: true } });
  const onPlain = await jsm.streams.getMessage(streams.events(REGION), { last_by_subj: eventSubject(REGION, "cancelled") });
  expect(onPlain!.json<{ taskId: string; data: { callback: boolean } }>()).toMatchObject({ taskId: plain, data: { callback: false } });
});
