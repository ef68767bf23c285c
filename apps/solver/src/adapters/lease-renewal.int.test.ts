// Issue 13, row writes per task: a lease renewal writes only the leases that have run a sixth of
// their length, against a real Postgres: a task finished within seconds costs no renewal write,
// and a long one is still renewed long before its lease runs out.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { createSolverStore } from "./pg.ts";

let tdb: TestDatabase;
let database: Database;
/** The adapter's own connection: the solver's role (issue 34), not the admin's. */
let solver: Database;
beforeAll(async () => {
  tdb = await createTestDatabase("renewal");
  database = openDatabase(tdb.url, { max: 4 });
  solver = openDatabase(tdb.appUrls.solver, { max: 4 });
});
afterAll(async () => {
  await solver.close();
  await database.close();
  await tdb.drop();
});

const leftMs = async (id: string) =>
  Number(
    (
      await database.sql<
        { ms: number }[]
      >`select extract(epoch from (lease_until - now())) * 1000 as ms from tasks where id = ${id}`
    )[0]!.ms,
  );

test("a renewal leaves a lease with more than 5/6 of its length alone, renews an older one, and never another worker's", async () => {
  const store = createSolverStore(solver.db);
  const leaseMs = 6000;
  const [fresh, older, others] = [randomUUID(), randomUUID(), randomUUID()];
  for (const [id, owner, left] of [
    [fresh, "w1", 5900],
    [older, "w1", 4000],
    [others, "w2", 1000],
  ] as const) {
    await database.sql`
      insert into tasks (id, owner, request_hash, region, type, priority, params, state, lease_owner, lease_until)
      values (${id}, 'o', 'h', 'rn', 'turnstile', 'normal', '{}'::jsonb, 'solving', ${owner}, now() + ${`${left} milliseconds`}::interval)`;
  }
  const updatesBefore = await tupUpdates();
  expect(await store.renewLeases("w1", [fresh, older, others], leaseMs)).toBe(1);
  expect(await leftMs(older)).toBeGreaterThan(5500);
  expect(await leftMs(fresh)).toBeLessThan(5950);
  expect(await leftMs(others)).toBeLessThan(1000);
  // A sixth of the lease later, the fresh one is due as well.
  await Bun.sleep(1100);
  expect(await store.renewLeases("w1", [fresh], leaseMs)).toBe(1);
  expect(await leftMs(fresh)).toBeGreaterThan(5500);
  await eventuallyCounted(updatesBefore + 2);
});

/** Row updates of `tasks` so far (pg_stat counters flush within a second or so). */
async function tupUpdates(): Promise<number> {
  const [r] = await database.sql<
    { n: string }[]
  >`select n_tup_upd::text as n from pg_stat_user_tables where relname = 'tasks'`;
  return Number(r?.n ?? 0);
}
async function eventuallyCounted(atMost: number): Promise<void> {
  // The statistics lag: read them after they have had time to flush, and check no more than two updates were made.
  await Bun.sleep(1200);
  expect(await tupUpdates()).toBeLessThanOrEqual(atMost);
}
