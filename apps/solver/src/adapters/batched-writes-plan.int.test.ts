// Issue 13: the solver's batched writes find their rows by primary key, whatever the statistics
// say. With `t.state` in the guards, statistics taken while the table held only finished rows
// made the planner scan `tasks_open_idx` (every open row's heap page) for a batch of a few rows;
// a generic plan cached while the table was small scanned the whole table. Measured here as heap
// blocks touched (pg_statio_user_tables) by the claims, checkpoints and completions of 8-row
// batches among 20,000 open rows, on a pool of one connection configured as the solver's.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, openDatabase, tasks } from "@pipeline/shared/db";
import { createBatchedWrites } from "./batched-writes.ts";
import { createCheckpointWriter } from "./checkpoints.ts";

const OPEN = 20_000;
let tdb: TestDatabase;
let admin: Database;
let solverPool: Database;
beforeAll(async () => {
  tdb = await createTestDatabase("plans");
  admin = openDatabase(tdb.url, { max: 2 });
  // As the solver opens it (service.ts: its own role, custom plans), with one connection so its statistics can be flushed.
  solverPool = openDatabase(tdb.appUrls.solver, { max: 1, customPlans: true });
  const row = (state: "queued" | "completed") => ({
    id: randomUUID(),
    owner: "o",
    requestHash: "h",
    region: "pl",
    type: "turnstile" as const,
    priority: "normal" as const,
    params: { sitekey: "s", pageurl: "https://example.com" },
    state,
  });
  // The statistics of a young table: only finished rows when ANALYZE ran.
  await admin.db.insert(tasks).values(Array.from({ length: 50 }, () => row("completed")));
  await admin.sql`analyze tasks`;
  // The solver's first tasks, while the table is small: a prepared statement executed more than
  // five times may switch to a generic plan, made now and kept.
  await admin.db.insert(tasks).values(Array.from({ length: 64 }, () => row("queued")));
  await work((await admin.sql<{ id: string }[]>`select id from tasks where state = 'queued'`).map((r) => r.id));
  for (let i = 0; i < OPEN; i += 2000)
    await admin.db.insert(tasks).values(Array.from({ length: 2000 }, () => row("queued")));
}, 60_000);
afterAll(async () => {
  await solverPool?.close();
  await admin?.close();
  await tdb?.drop();
});

/** Heap blocks of `tasks` the solver pool's connection has read so far (its pending statistics flushed first). */
async function heapBlocks(): Promise<number> {
  await solverPool.sql`select pg_stat_force_next_flush()`;
  await solverPool.sql`select 1`; // the flush happens when that connection goes idle
  for (let i = 0; i < 50; i++) {
    const [r] = await admin.sql<
      { n: string }[]
    >`select (coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0))::text as n from pg_statio_user_tables where relname = 'tasks'`;
    const n = Number(r?.n ?? 0);
    if (n !== last) return (last = n);
    await Bun.sleep(20);
  }
  return last;
}
let last = -1;

/** Claims, checkpoints and completes the tasks in batches of 8, as the solver's group commits do. */
async function work(ids: string[]): Promise<void> {
  const writes = createBatchedWrites(solverPool.sql, { maxInFlight: 1 });
  const checkpoints = createCheckpointWriter(solverPool.sql, { maxInFlight: 1 });
  for (let b = 0; b * 8 < ids.length; b++) {
    const batch = ids.slice(b * 8, b * 8 + 8);
    const claimed = await Promise.all(batch.map((id) => writes.claim({ id, worker: "w1", leaseMs: 30_000 })));
    expect(claimed.every((r) => r?.state === "solving")).toBe(true);
    const marked = await Promise.all(
      batch.map((id) => checkpoints.write({ id, worker: "w1", providerId: `p-${id}`, keyRef: "k" })),
    );
    expect(marked.every((m) => m.written && m.stillOwner)).toBe(true);
    const done = await Promise.all(
      batch.map((id) => writes.complete({ id, worker: "w1", token: "t", userAgent: null, expiresAt: null, polls: 1 })),
    );
    expect(done.every((d) => d !== undefined)).toBe(true);
  }
}

test("claims, checkpoints and completions of 8-row batches touch a few blocks per row, not the open rows' pages", async () => {
  const ids = (
    await admin.sql<{ id: string }[]>`select id from tasks where state = 'queued' order by random() limit 80`
  ).map((r) => r.id);
  last = await heapBlocks();
  const before = last;
  await work(ids);
  const touched = (await heapBlocks()) - before;
  // 240 row writes: found by primary key, each touches its page a few times (~1,000 blocks in
  // all). Through the state index, each statement visits every open row's page (hundreds).
  console.log(`[plans] 30 batched statements over 80 of ${OPEN} open rows: ${touched} heap blocks`);
  expect(touched).toBeLessThan(2_000);
});
