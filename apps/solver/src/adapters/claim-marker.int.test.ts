// Issue 13: the claim writes the claimer's submit marker in the same row write (claim and submit
// marker in one write), against a real Postgres: only when the task has no provider id and no
// other worker's marker (a presumed-dead holder's in.php may still land: the taker waits for it).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { createBatchedWrites } from "./batched-writes.ts";

let tdb: TestDatabase;
let database: Database;
/** The adapter's own connection: the solver's role (issue 34), not the admin's. */
let solver: Database;
beforeAll(async () => {
  tdb = await createTestDatabase("claimmark");
  database = openDatabase(tdb.url, { max: 4 });
  solver = openDatabase(tdb.appUrls.solver, { max: 4 });
});
afterAll(async () => {
  await solver.close();
  await database.close();
  await tdb.drop();
});

async function insert(id: string, set: string) {
  await database.sql.unsafe(
    `insert into tasks (id, owner, request_hash, region, type, priority, params, state) values ($1, 'o', 'h', 'cm', 'turnstile', 'normal', '{}'::jsonb, 'queued')`,
    [id],
  );
  if (set) await database.sql.unsafe(`update tasks set ${set} where id = $1`, [id]);
}
const marker = async (id: string) =>
  (await database.sql<{ owner: string | null }[]>`select submit_owner as owner from tasks where id = ${id}`)[0]!;

test("a claim marks the submit it leads to, in the same write; never over another worker's marker or a stored provider id", async () => {
  const writes = createBatchedWrites(solver.sql);
  const fresh = randomUUID();
  const retrying = randomUUID(); // an earlier submit of w1 created nothing (marker cleared)
  const adopted = randomUUID(); // w2 died mid-submit: its marker stays for the taker to wait on
  const resumed = randomUUID(); // the provider has it already: polled, not submitted
  const stale = Date.now() - 5000;
  await insert(fresh, "");
  await insert(retrying, "state = 'retrying', attempts = 1");
  await insert(
    adopted,
    `state = 'solving', lease_owner = 'w2', lease_until = now() - interval '1 second', submit_owner = 'w2', submit_started_at = to_timestamp(${stale / 1000})`,
  );
  await insert(resumed, "state = 'retrying', provider_id = '123', attempts = 1");

  const [a, b, c, d] = await Promise.all(
    [fresh, retrying, adopted, resumed].map((id) => writes.claim({ id, worker: "w1", leaseMs: 30_000 })),
  );
  for (const r of [a, b, c, d]) expect(r?.state).toBe("solving");
  // The returned rows say it (the handler skips its own beginSubmit then), and so does the table.
  expect(a!.submitOwner).toBe("w1");
  expect(a!.submitStartedAt).toBeInstanceOf(Date);
  expect(b!.submitOwner).toBe("w1");
  expect(c!.submitOwner).toBe("w2");
  expect(c!.submitStartedAt!.getTime()).toBe(stale);
  expect(d!.submitOwner).toBeNull();
  expect(d!.submitStartedAt).toBeNull();
  expect((await marker(fresh)).owner).toBe("w1");
  expect((await marker(adopted)).owner).toBe("w2");
});
