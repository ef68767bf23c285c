// The measured p90 solve time per type (docs/scheduling.md), read as the gateway's own role from
// real rows: queued-to-token time (from start_at when scheduled), only types with enough samples,
// only tasks completed within the window; a scheduled row is inserted with its instants.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { createTestDatabase, eventually, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { createTaskStore } from "./pg.ts";
import { createSolveTimes } from "./solve-times.ts";

let tdb: TestDatabase;
let admin: Database;
let gateway: Database;
beforeAll(async () => {
  tdb = await createTestDatabase("gwsolve");
  admin = openDatabase(tdb.url, { max: 2 });
  gateway = openDatabase(tdb.appUrls.gateway, { max: 2, appName: "gateway" });
});
afterAll(async () => {
  await gateway.close();
  await admin.close();
  await tdb.drop();
});

/** A completed row: went to its lane `queuedAgoMs` ago (created, or start_at when `scheduled`), solved in `solveMs`. */
const iso = (ms: number) => new Date(ms).toISOString();

async function completed(type: string, solveMs: number, o: { scheduled?: boolean; finishedAgoMs?: number } = {}) {
  const done = Date.now() - (o.finishedAgoMs ?? 1000);
  const queued = new Date(done - solveMs);
  // A scheduled task was accepted long before its start: only start_at counts.
  const created = o.scheduled ? new Date(queued.getTime() - 3600_000) : queued;
  await admin.sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, created_at, start_at, completed_at, updated_at)
    values (${randomUUID()}, 'c', 'h', 'r', ${type}, 'normal', '{}'::jsonb, 'completed', ${created.toISOString()}::timestamptz,
      ${o.scheduled ? queued.toISOString() : null}::timestamptz, ${iso(done)}::timestamptz, ${iso(done)}::timestamptz)`;
}

test("p90 of queued-to-token per type, from start_at for scheduled tasks, only with enough samples in the window", async () => {
  // turnstile: 1..30 s (p90 = 27 s); half of them scheduled an hour after acceptance.
  for (let i = 1; i <= 30; i++) await completed("turnstile", i * 1000, { scheduled: i % 2 === 0 });
  // recaptcha_v2: too few to count.
  for (let i = 0; i < 5; i++) await completed("recaptcha_v2", 2000);
  // geetest: enough, but finished before the window.
  for (let i = 0; i < 25; i++) await completed("geetest", 1000, { finishedAgoMs: 3600_000 });
  const log = createLogger("solve-times-test", { level: "silent" });
  const times = createSolveTimes(gateway.db, log, { windowMs: 15 * 60_000, refreshMs: 60_000 });
  // The first call starts the read and answers what it has (nothing yet): a submit never waits.
  expect(times.p90Ms("turnstile")).toBeUndefined();
  const p90 = await eventually(async () => times.p90Ms("turnstile"), 5000);
  expect(p90).toBeGreaterThanOrEqual(26_900);
  expect(p90).toBeLessThanOrEqual(27_200);
  expect(times.p90Ms("recaptcha_v2")).toBeUndefined();
  expect(times.p90Ms("geetest")).toBeUndefined();
});

test("the gateway's role inserts a scheduled row with its instants", async () => {
  const store = createTaskStore(gateway.db);
  const id = randomUUID();
  const at = (ms: number) => new Date(Date.now() + ms);
  const inserted = await store.insertQueued({
    id,
    owner: "c",
    idempotencyKey: null,
    requestHash: "h",
    region: "r",
    type: "turnstile",
    priority: "normal",
    params: {},
    callbackUrl: null,
    deadlineAt: at(120_000),
    notBefore: at(30_000),
    needBy: at(120_000),
    startAt: at(60_000),
  });
  expect(inserted).toBeDefined();
  const row = await store.get(id);
  expect(row?.state).toBe("queued");
  expect(row?.needBy?.getTime()).toBe(row?.deadlineAt?.getTime());
  expect(row?.startAt!.getTime()).toBeGreaterThan(row!.notBefore!.getTime());
});
