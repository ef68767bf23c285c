// The ledger's charges, written with the completion by the solver's own role against a real
// Postgres: once per task and provider task, whoever reads the answer, whatever the lease says;
// the completing charge on the task's row (no ledger row), any other in the ledger table.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, ledgerAll, openDatabase, tasks } from "@pipeline/shared/db";
import { eq, inArray } from "drizzle-orm";
import type { Charge } from "../domain/charge.ts";
import { createBatchedWrites } from "./batched-writes.ts";

let tdb: TestDatabase;
let database: Database;
let solver: Database;
beforeAll(async () => {
  tdb = await createTestDatabase("ledger_charges");
  database = openDatabase(tdb.url, { max: 4 });
  solver = openDatabase(tdb.appUrls.solver, { max: 4 });
});
afterAll(async () => {
  await solver.close();
  await database.close();
  await tdb.drop();
});

const solving = (id: string, owner: string, worker: string): typeof tasks.$inferInsert => ({
  id,
  owner,
  requestHash: "h",
  region: "lc",
  type: "recaptcha_v2",
  priority: "normal",
  params: {},
  state: "solving",
  leaseOwner: worker,
  leaseUntil: new Date(Date.now() + 60_000),
  providerId: `9${id.slice(0, 6).replace(/\D/g, "1")}`,
});
const charge = (providerTaskId: string, amountMicros = 2990): Charge => ({
  providerTaskId,
  provider: "127.0.0.1:18090/key_abc",
  region: "lc",
  solverVersion: "v1",
  amountMicros,
  priceSource: "provider",
});
const done = (id: string, worker: string, c: Charge | null) => ({
  id,
  worker,
  token: "tok",
  userAgent: null,
  expiresAt: null,
  polls: 1,
  charge: c,
});

const tableRows = async (ids: string[]) =>
  (await database.sql<{ n: number }[]>`select count(*)::int as n from ledger where task_id = any(${ids}::uuid[])`)[0]!
    .n;

test("a completion books its charge with the task's owner and type, once even when completed twice", async () => {
  const ids = Array.from({ length: 20 }, () => randomUUID());
  await database.db.insert(tasks).values(ids.map((id, i) => solving(id, `client${i % 2}`, "w1")));
  const w = createBatchedWrites(solver.sql);
  const first = await Promise.all(ids.map((id) => w.complete(done(id, "w1", charge(`p-${id}`)))));
  expect(first.every((r) => r !== undefined)).toBe(true);
  // A second reader of the same answers (a redelivery): the completion does not apply, nothing is booked twice.
  const again = await Promise.all(ids.map((id) => w.complete(done(id, "w1", charge(`p-${id}`)))));
  expect(again.every((r) => r === undefined)).toBe(true);
  const rows = await database.db.select().from(ledgerAll).where(inArray(ledgerAll.taskId, ids));
  expect(rows.length).toBe(20);
  // Each on its task's row: the completion was the one write.
  expect(await tableRows(ids)).toBe(0);
  const [row] = await database.db.select().from(tasks).where(eq(tasks.id, ids[0]!));
  expect([row!.chargeProviderTaskId, row!.chargeMicros, row!.chargeSolverVersion]).toEqual([`p-${ids[0]}`, 2990, "v1"]);
  expect(rows.every((r) => r.kind === "charge" && r.taskType === "recaptcha_v2" && r.amountMicros === 2990)).toBe(true);
  expect(rows.filter((r) => r.owner === "client0").length).toBe(10);
  const [sum] = await database.sql<
    { s: string }[]
  >`select sum(amount_micros)::text as s from ledger_all where task_id = any(${ids}::uuid[])`;
  expect(sum!.s).toBe("59800");
});

test("an answer read by a worker that lost its lease is still booked (the provider charged); no charge, no entry", async () => {
  const lost = randomUUID();
  const free = randomUUID();
  await database.db.insert(tasks).values([solving(lost, "c", "w2"), solving(free, "c", "w1")]);
  const w = createBatchedWrites(solver.sql);
  expect(await w.complete(done(lost, "w1", charge("p-lost", 1450)))).toBeUndefined();
  expect(await w.complete(done(free, "w1", null))).toBeDefined();
  const rows = await database.db
    .select()
    .from(ledgerAll)
    .where(inArray(ledgerAll.taskId, [lost, free]));
  expect(rows.map((r) => [r.taskId, r.amountMicros])).toEqual([[lost, 1450]]);
  const [row] = await database.db.select().from(tasks).where(eq(tasks.id, lost));
  expect(row!.state).toBe("solving");
});

test("a resubmitted task's second provider task is a second charge", async () => {
  const id = randomUUID();
  await database.db.insert(tasks).values(solving(id, "c", "w1"));
  const w = createBatchedWrites(solver.sql);
  await w.complete(done(id, "w9", charge("p-first")));
  await w.complete(done(id, "w1", charge("p-second")));
  const rows = await database.db.select().from(ledgerAll).where(eq(ledgerAll.taskId, id));
  expect(rows.map((r) => r.providerTaskId).sort()).toEqual(["p-first", "p-second"]);
  expect(await tableRows([id])).toBe(1);
});

test("a charge the ledger table holds from before the columns is not booked again on the row", async () => {
  const id = randomUUID();
  await database.db.insert(tasks).values(solving(id, "c", "w1"));
  await database.sql`insert into ledger (task_id, kind, provider_task_id, owner, task_type, provider, region, solver_version, amount_micros, price_source)
    values (${id}, 'charge', 'p-old', 'c', 'recaptcha_v2', 'h/k', 'lc', 'v0', 2990, 'provider')`;
  const w = createBatchedWrites(solver.sql);
  expect(await w.complete(done(id, "w1", charge("p-old")))).toBeDefined();
  const rows = await database.db.select().from(ledgerAll).where(eq(ledgerAll.taskId, id));
  expect(rows.map((r) => [r.providerTaskId, r.solverVersion])).toEqual([["p-old", "v0"]]);
});

test("two workers reading the same answer at once (one holds the task, one lost it) book it once", async () => {
  const ids = Array.from({ length: 40 }, () => randomUUID());
  await database.db.insert(tasks).values(ids.map((id) => solving(id, "c", "w1")));
  const other = openDatabase(tdb.appUrls.solver, { max: 4 });
  try {
    const holder = createBatchedWrites(solver.sql);
    const loser = createBatchedWrites(other.sql);
    const results = await Promise.all(
      ids.map((id, i) =>
        Promise.all(
          i % 2 === 0
            ? [holder.complete(done(id, "w1", charge(`p-${id}`))), loser.complete(done(id, "w2", charge(`p-${id}`)))]
            : [loser.complete(done(id, "w2", charge(`p-${id}`))), holder.complete(done(id, "w1", charge(`p-${id}`)))],
        ),
      ),
    );
    expect(results.flat().filter((r) => r !== undefined).length).toBe(40);
  } finally {
    await other.close();
  }
  const [n] = await database.sql<{ entries: number; tasks: number }[]>`
    select count(*)::int as entries, count(distinct task_id)::int as tasks from ledger_all where task_id = any(${ids}::uuid[])`;
  expect(n).toEqual({ entries: 40, tasks: 40 });
});
