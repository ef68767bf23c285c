// Group-committed claims, submit markers and completions against a real Postgres: each request
// in a batch is answered for its own row and guard, and the rows come back as drizzle's own.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, openDatabase, tasks } from "@pipeline/shared/db";
import { eq, inArray } from "drizzle-orm";
import { createBatchedWrites } from "./batched-writes.ts";

let tdb: TestDatabase;
let database: Database;
/** The adapter's own connection: the solver's role (issue 34), not the admin's. */
let solver: Database;
beforeAll(async () => {
  tdb = await createTestDatabase("batched");
  database = openDatabase(tdb.url, { max: 4 });
  solver = openDatabase(tdb.appUrls.solver, { max: 4 });
});
afterAll(async () => {
  await solver.close();
  await database.close();
  await tdb.drop();
});

const row = (id: string, extra: Partial<typeof tasks.$inferInsert>): typeof tasks.$inferInsert => ({
  id,
  owner: "o",
  requestHash: "h",
  region: "bw",
  type: "turnstile",
  priority: "normal",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com", action: "login" },
  state: "queued",
  deadlineAt: new Date(Date.now() + 600_000),
  ...extra,
});

test("a burst of claims: claimable rows are claimed once each, the rest are not; rows equal drizzle's select", async () => {
  const queued = Array.from({ length: 150 }, () => randomUUID());
  const retrying = randomUUID();
  const expired = randomUUID(); // solving, lease of w2 ran out: taken over
  const own = randomUUID(); // solving under w1 already: claimed again by w1
  const busy = randomUUID(); // solving under w2, lease running: not claimed
  const done = randomUUID(); // completed: not claimed
  const past = new Date(Date.now() - 1000);
  const future = new Date(Date.now() + 60_000);
  await database.db
    .insert(tasks)
    .values([
      ...queued.map((id) => row(id, {})),
      row(retrying, { state: "retrying", attempts: 1, startedAt: past }),
      row(expired, { state: "solving", leaseOwner: "w2", leaseUntil: past }),
      row(own, { state: "solving", leaseOwner: "w1", leaseUntil: future }),
      row(busy, { state: "solving", leaseOwner: "w2", leaseUntil: future }),
      row(done, { state: "completed", token: "t" }),
    ]);
  const w = createBatchedWrites(solver.sql, { maxInFlight: 1 });
  const ids = [...queued, retrying, expired, own, busy, done, queued[0]!];
  const got = await Promise.all(ids.map((id) => w.claim({ id, worker: "w1", leaseMs: 30_000 })));

  expect(got.slice(0, 153).every((r) => r?.state === "solving" && r.leaseOwner === "w1")).toBe(true);
  expect(got[153]).toBeUndefined();
  expect(got[154]).toBeUndefined();
  // The same id twice: both apply, one after the other (own lease), attempts counted twice.
  expect(got[155]?.attempts).toBe(2);
  expect(got[0]?.attempts).toBe(1);
  expect(got[150]?.startedAt?.getTime()).toBe(past.getTime()); // kept, not reset

  const fromDrizzle = await database.db
    .select()
    .from(tasks)
    .where(inArray(tasks.id, [queued[1]!, retrying]));
  expect(got[1]).toEqual(fromDrizzle.find((r) => r.id === queued[1])!);
  expect(got[150]).toEqual(fromDrizzle.find((r) => r.id === retrying)!);
  expect(got[1]!.leaseUntil!.getTime() - Date.now()).toBeGreaterThan(25_000);
  expect(got[1]!.params).toEqual({
    sitekey: "0x4AAAAAAAC3DHQFLr1GavRN",
    pageurl: "https://example.com",
    action: "login",
  });

  const [untouched] = await database.db.select().from(tasks).where(eq(tasks.id, busy));
  expect(untouched).toMatchObject({ leaseOwner: "w2", attempts: 0, version: 0 });
});

test("submit markers and completions are guarded by state and lease owner, per request", async () => {
  const mine = Array.from({ length: 60 }, () => randomUUID());
  const theirs = randomUUID();
  const cancelled = randomUUID();
  await database.db
    .insert(tasks)
    .values([
      ...mine.map((id, i) =>
        row(id, { state: "solving", leaseOwner: "w1", callbackUrl: i % 4 ? null : `https://hooks.example.com/${i}` }),
      ),
      row(theirs, { state: "solving", leaseOwner: "w2" }),
      row(cancelled, { state: "cancelled" }),
    ]);
  const w = createBatchedWrites(solver.sql, { maxInFlight: 1 });
  const marks = await Promise.all([...mine, theirs, cancelled].map((id) => w.beginSubmit({ id, worker: "w1" })));
  expect(marks).toEqual([...mine.map(() => true), false, false]);

  const expiresAt = new Date(Date.now() + 120_000);
  const results = await Promise.all(
    [...mine, theirs, cancelled].map((id, i) =>
      w.complete({
        id,
        worker: "w1",
        token: `tok-${i}`,
        userAgent: i % 2 ? "UA/1" : null,
        expiresAt: i % 3 ? expiresAt : null,
        polls: 3,
      }),
    ),
  );
  expect(results.slice(60)).toEqual([undefined, undefined]);
  const stored = await database.db.select().from(tasks).where(inArray(tasks.id, mine));
  for (const [i, r] of results.slice(0, 60).entries()) {
    const s = stored.find((x) => x.id === mine[i])!;
    expect(s).toMatchObject({
      state: "completed",
      token: `tok-${i}`,
      userAgent: i % 2 ? "UA/1" : null,
      providerPolls: 3,
      leaseOwner: null,
      version: 1,
    });
    expect(s.tokenExpiresAt?.getTime() ?? null).toBe(i % 3 ? expiresAt.getTime() : null);
    // What the completion reports is the stored row's (and whether it has a callback URL).
    expect(r).toEqual({
      version: s.version,
      createdAt: s.createdAt,
      completedAt: s.completedAt!,
      providerId: s.providerId,
      callback: i % 4 === 0,
    });
  }
  const [other] = await database.db.select().from(tasks).where(eq(tasks.id, theirs));
  expect(other).toMatchObject({ state: "solving", token: null, submitOwner: null });
});
