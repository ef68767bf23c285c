// The gateway's Postgres adapters connected as the gateway's own role (pipeline_gateway, issue 34):
// every query the gateway makes (submit, reads, cancel, redrive and its undo, the unpublished
// row's delete, the quota figures, the task counts of /metrics) works with its grants alone.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { createGatewayMetrics } from "./metrics.ts";
import { createTaskStore, type QueuedRow } from "./pg.ts";
import { createUsageSource } from "./usage.ts";

let tdb: TestDatabase;
let admin: Database;
let gateway: Database;
beforeAll(async () => {
  tdb = await createTestDatabase("gwpg");
  admin = openDatabase(tdb.url, { max: 2 });
  gateway = openDatabase(tdb.appUrls.gateway, { max: 4, appName: "gateway" });
});
afterAll(async () => {
  await gateway.close();
  await admin.close();
  await tdb.drop();
});

const queued = (owner = "client-a"): QueuedRow => ({
  id: randomUUID(),
  owner,
  idempotencyKey: null,
  requestHash: "h",
  region: "gwpg",
  type: "turnstile",
  priority: "normal",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/" },
  callbackUrl: "https://example.com/hook",
  deadlineAt: new Date(Date.now() + 600_000),
});

test("submit, read, cancel, redrive and undo, delete of an unpublished row: each as pipeline_gateway", async () => {
  const store = createTaskStore(gateway.db);
  const [a, b, c] = [queued(), queued(), queued()];
  const inserted = await Promise.all([a, b, c].map((r) => store.insertQueued(r)));
  expect(inserted.every((r) => r?.createdAt instanceof Date)).toBe(true);
  expect(await store.insertQueued(a)).toBeUndefined();
  expect((await store.get(a.id))?.state).toBe("queued");
  expect((await store.getMany([a.id, b.id, randomUUID()])).map((r) => r.id).sort()).toEqual([a.id, b.id].sort());
  await store.ping();

  const cancelled = await store.cancel(a.id, "client-a");
  expect(cancelled?.state).toBe("cancelled");
  expect(await store.cancel(b.id, "someone-else")).toBeUndefined();

  await admin.sql`update tasks set state = 'failed', version = 4, error_code = 'X', completed_at = now() where id = ${b.id}`;
  const redriven = await store.redrive(b.id, "client-a", 60_000);
  expect(redriven).toMatchObject({ state: "queued", attempts: 0, redrives: 1 });
  await store.undoRedrive(redriven!);
  expect((await store.get(b.id))?.state).toBe("failed");

  // The unpublished row goes; a row something happened to (version > 0) stays.
  await store.deleteUnpublished(c.id);
  expect(await store.get(c.id)).toBeUndefined();
  await store.deleteUnpublished(a.id);
  expect((await store.get(a.id))?.state).toBe("cancelled");
});

test("the quota figures and the task counts of /metrics, as pipeline_gateway", async () => {
  const store = createTaskStore(gateway.db);
  for (let i = 0; i < 3; i++) await store.insertQueued(queued("client-q"));
  const usage = createUsageSource(gateway.db);
  expect((await usage.openByOwner()).get("client-q")).toBe(3);
  const day = new Date(Math.floor(Date.now() / 86_400_000) * 86_400_000);
  const since = await usage.createdSince("client-q", day, new Date(day.getTime() + 86_400_000), 0);
  expect(since.rows.reduce((n, r) => n + r.n, 0)).toBe(3);
  const metrics = createGatewayMetrics(gateway.db, { countsEveryMs: 0 });
  expect(await (await metrics.response()).text()).toMatch(
    /pipeline_tasks\{state="queued",type="turnstile"[^}]*\} [1-9]/,
  );
});

test("what the gateway's role may not do stays refused through its own pool (DELETE, the solver's columns)", async () => {
  const row = queued();
  await createTaskStore(gateway.db).insertQueued(row);
  await expect(gateway.sql`delete from tasks where id = ${row.id}`).rejects.toMatchObject({ code: "42501" });
  await expect(gateway.sql`update tasks set token = 'forged' where id = ${row.id}`).rejects.toMatchObject({
    code: "42501",
  });
});
