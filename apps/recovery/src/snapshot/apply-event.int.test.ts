// Replaying `completed` events that carry no token (issue 16.3: the token stays in the row).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, openDatabase, schema } from "@pipeline/shared/db";
import type { TaskEvent } from "@pipeline/shared/schemas";
import { toTaskView } from "@pipeline/shared/tasks";
import { eq } from "drizzle-orm";
import postgres from "postgres";
import { applyEvent } from "./apply-event.ts";

let tdb: TestDatabase;
let sql: postgres.Sql;
let db: Database;
beforeAll(async () => {
  tdb = await createTestDatabase("apply_event");
  sql = postgres(tdb.url, { max: 2, onnotice: () => {} });
  db = openDatabase(tdb.url, { max: 1 });
});
afterAll(async () => {
  await sql?.end({ timeout: 5 });
  await db?.close();
  await tdb?.drop();
});

const at = (ms = 0) => new Date(Date.now() + ms).toISOString();
async function accepted(): Promise<string> {
  const taskId = crypto.randomUUID();
  const ev: TaskEvent = {
    taskId,
    kind: "accepted",
    state: "queued",
    version: 1,
    region: "local",
    at: at(),
    data: {
      owner: "o",
      type: "turnstile",
      priority: "normal",
      params: { sitekey: "s", pageurl: "https://example.com" },
      requestHash: "h",
    },
  };
  expect(await applyEvent(sql, ev)).toBe("inserted");
  return taskId;
}
const completed = (taskId: string, data: Record<string, unknown>): TaskEvent => ({
  taskId,
  kind: "completed",
  state: "completed",
  version: 3,
  region: "local",
  at: at(),
  data,
});
const row = async (id: string) => (await db.db.select().from(schema.tasks).where(eq(schema.tasks.id, id)))[0]!;

test("a completed event with tokenStored (no token) restores the task as completed without its token: the client sees expired, TOKEN_UNAVAILABLE", async () => {
  const id = await accepted();
  const expiresAt = at(120_000);
  expect(
    await applyEvent(
      sql,
      completed(id, { tokenStored: true, userAgent: null, expiresAt, completedAt: at(), providerId: "p-1" }),
    ),
  ).toBe("applied");
  const r = await row(id);
  expect(r.state).toBe("completed");
  expect(r.version).toBe(3);
  expect(r.token).toBeNull();
  expect(r.providerId).toBe("p-1");
  expect(r.tokenExpiresAt?.toISOString()).toBe(expiresAt);
  const v = toTaskView(r, new Date());
  expect(v.status).toBe("expired");
  expect(v.result).toBeUndefined();
  expect(v.error?.code).toBe("TOKEN_UNAVAILABLE");
});

test("an older completed event with the token still restores it; one with neither token nor tokenStored is skipped", async () => {
  const a = await accepted();
  expect(await applyEvent(sql, completed(a, { token: "TOKEN-A", expiresAt: at(120_000), completedAt: at() }))).toBe(
    "applied",
  );
  expect((await row(a)).token).toBe("TOKEN-A");
  expect(toTaskView(await row(a), new Date()).result?.token).toBe("TOKEN-A");
  const b = await accepted();
  expect(await applyEvent(sql, completed(b, { expiresAt: at(120_000) }))).toBe("skipped");
  expect((await row(b)).state).toBe("queued");
});

test("an accepted event of a scheduled task restores notBefore, needBy and startAt into the row (its start is kept)", async () => {
  const taskId = crypto.randomUUID();
  const notBefore = at(60_000);
  const needBy = at(120_000);
  const startAt = at(90_000);
  const ev: TaskEvent = {
    taskId,
    kind: "accepted",
    state: "queued",
    version: 0,
    region: "local",
    at: at(),
    data: {
      owner: "o",
      type: "turnstile",
      priority: "normal",
      params: { sitekey: "s", pageurl: "https://example.com/scheduled" },
      requestHash: "h",
      deadlineAt: needBy,
      notBefore,
      needBy,
      startAt,
    },
  };
  expect(await applyEvent(sql, ev)).toBe("inserted");
  const r = await row(taskId);
  expect(r.notBefore?.toISOString()).toBe(notBefore);
  expect(r.needBy?.toISOString()).toBe(needBy);
  expect(r.startAt?.toISOString()).toBe(startAt);
  const v = toTaskView(r, new Date());
  expect(v.status).toBe("queued");
  expect(v.startAt).toBe(startAt);
  // A task without a schedule (an older gateway's event, or none given) gets none of the three.
  const plain = await accepted();
  const p = await row(plain);
  expect([p.notBefore, p.needBy, p.startAt]).toEqual([null, null, null]);
  // A malformed instant is no task the gateway could have published: skipped, never written.
  const bad = { ...ev, taskId: crypto.randomUUID(), data: { ...ev.data, startAt: "tomorrow" } };
  expect(await applyEvent(sql, bad)).toBe("skipped");
});

test("a submitted event is also its claim's: alone it makes the row solving at its version, with the worker, the attempt and the provider id", async () => {
  const id = await accepted();
  const submitted = (version: number, data: Record<string, unknown>): TaskEvent => ({
    taskId: id,
    kind: "submitted",
    state: "solving",
    version,
    region: "local",
    at: at(),
    data,
  });
  const data = { providerId: "p-1", keyRef: "k1", worker: "solver-a", attempt: 1 };
  // The accepted event above is version 1; the claim's is 2.
  expect(await applyEvent(sql, submitted(2, data))).toBe("applied");
  const r = await row(id);
  expect(r).toMatchObject({ state: "solving", version: 2, attempts: 1, leaseOwner: "solver-a", leaseUntil: null });
  expect([r.providerId, r.providerKeyRef]).toEqual(["p-1", "k1"]);
  expect(r.startedAt).not.toBeNull();
  // Again (a replayed range): the same row; an older claim's event changes nothing.
  expect(await applyEvent(sql, submitted(2, data))).toBe("applied");
  expect(await applyEvent(sql, submitted(1, { ...data, providerId: "p-0", worker: "solver-b" }))).toBe("stale");
  expect(await row(id)).toMatchObject({ version: 2, providerId: "p-1", leaseOwner: "solver-a" });
  // An older solver's event (a `solving` before it, no worker in it) keeps the holder the `solving` named.
  const old = await accepted();
  await applyEvent(sql, {
    ...submitted(2, {}),
    taskId: old,
    kind: "solving",
    data: { worker: "solver-c", attempt: 1 },
  });
  expect(await applyEvent(sql, { ...submitted(2, { providerId: "p-2", keyRef: "k1" }), taskId: old })).toBe("applied");
  expect(await row(old)).toMatchObject({ state: "solving", version: 2, leaseOwner: "solver-c", providerId: "p-2" });
  // A final row stays final.
  await applyEvent(sql, { ...completed(id, { token: "t", providerId: "p-1" }) });
  expect(await applyEvent(sql, submitted(4, { ...data, providerId: "p-3" }))).toBe("stale");
  expect(await row(id)).toMatchObject({ state: "completed", providerId: "p-1" });
});
