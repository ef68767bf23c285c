// The warm pools' Postgres adapter on a real database, as the gateway's own role (pipeline_gateway):
// many concurrent takes hand each ready token out exactly once, a token past maxAge is never handed
// out and is marked wasted, the keeper's lock is held by one round at a time, the cap per client
// holds under concurrent PUTs, and another owner sees no pool.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import type { PoolConfig } from "../domain/pools.ts";
import { createTaskStore } from "./pg.ts";
import { createPoolStore, type Pool } from "./pools.ts";

let tdb: TestDatabase;
let admin: Database;
let gateway: Database;
beforeAll(async () => {
  tdb = await createTestDatabase("gwpools");
  admin = openDatabase(tdb.url, { max: 2 });
  gateway = openDatabase(tdb.appUrls.gateway, { max: 12, appName: "gateway" });
});
afterAll(async () => {
  await gateway.close();
  await admin.close();
  await tdb.drop();
});

const cfg = (size = 3, maxAgeMs = 290_000): PoolConfig => ({
  type: "turnstile",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/pool" },
  priority: "normal",
  size,
  maxAgeMs,
});

/** A pool task inserted by the gateway's path, then completed `ageMs` ago as a solver would (admin). */
async function solvedToken(pool: Pool, ageMs: number): Promise<string> {
  const id = randomUUID();
  await createTaskStore(gateway.db).insertQueued({
    id,
    owner: pool.owner,
    idempotencyKey: null,
    requestHash: "h",
    region: "gwpools",
    type: pool.type,
    priority: pool.priority,
    params: pool.params,
    callbackUrl: null,
    deadlineAt: new Date(Date.now() + 600_000),
    poolId: pool.id,
  });
  await admin.sql`update tasks set state = 'completed', version = 2, token = ${`TOKEN-${id}`},
    completed_at = now() - ${`${ageMs} milliseconds`}::interval where id = ${id}`;
  return id;
}

test("30 concurrent takes of 10 ready tokens: each handed out once, 20 find none", async () => {
  const pools = createPoolStore(gateway.db);
  const put = await pools.put("client-a", "race", cfg(10), 20);
  if (!("pool" in put)) throw new Error("not created");
  const ids = await Promise.all(Array.from({ length: 10 }, (_, i) => solvedToken(put.pool, 1000 + i)));
  const takes = await Promise.all(Array.from({ length: 30 }, () => pools.take(put.pool)));
  const got = takes.filter((t) => t !== undefined).map((t) => t!.taskId);
  expect(got.length).toBe(10);
  expect(new Set(got).size).toBe(10);
  expect(new Set(got)).toEqual(new Set(ids));
  expect(takes.filter((t) => t !== undefined).every((t) => t!.token === `TOKEN-${t!.taskId}`)).toBe(true);
  const counts = await pools.counts(put.pool);
  expect(counts).toMatchObject({ solved: 10, handedOut: 10, ready: 0, wasted: 0, inProgress: 0 });
});

test("a take's Idempotency-Key: 30 concurrent takes with one key hand out one token, all 30 answer it; another key gets another", async () => {
  const pools = createPoolStore(gateway.db);
  const put = await pools.put("client-k", "idem", cfg(3), 20);
  if (!("pool" in put)) throw new Error("not created");
  await Promise.all([solvedToken(put.pool, 3000), solvedToken(put.pool, 2000), solvedToken(put.pool, 1000)]);
  // 30 at once against 3 ready rows: most of them find the rows locked by the others.
  const takes = await Promise.all(Array.from({ length: 30 }, () => pools.take(put.pool, "key-1")));
  expect(new Set(takes.map((t) => t?.token)).size).toBe(1);
  expect(takes.filter((t) => t?.replayed !== true).length).toBe(1);
  const again = await pools.take(put.pool, "key-1");
  expect(again).toMatchObject({ token: takes[0]!.token, replayed: true });
  const other = await pools.take(put.pool, "key-2");
  expect(other?.token).not.toBe(takes[0]!.token);
  expect(other?.replayed).toBeUndefined();
  expect(await pools.counts(put.pool)).toMatchObject({ solved: 3, handedOut: 2, ready: 1 });
});

test("the oldest ready token goes first; one past maxAge is never handed out and the keeper marks it wasted", async () => {
  const pools = createPoolStore(gateway.db);
  const put = await pools.put("client-a", "ages", cfg(3, 10_000), 20);
  if (!("pool" in put)) throw new Error("not created");
  const stale = await solvedToken(put.pool, 11_000);
  const older = await solvedToken(put.pool, 5000);
  const newer = await solvedToken(put.pool, 1000);
  expect((await pools.counts(put.pool)).ready).toBe(2);
  expect((await pools.take(put.pool))?.taskId).toBe(older);
  let wasted = 0;
  let state: { readySolvedAt: number[]; inProgress: number } | undefined;
  expect(
    await pools.withLock(put.pool, async (view) => {
      wasted = await view.expire();
      state = await view.state();
    }),
  ).toBe(true);
  expect(wasted).toBe(1);
  expect(state!.readySolvedAt.length).toBe(1);
  expect((await pools.take(put.pool))?.taskId).toBe(newer);
  expect(await pools.take(put.pool)).toBeUndefined();
  const [row] = await admin.sql<{ w: boolean; t: boolean }[]>`
    select pool_wasted_at is not null as w, pool_taken_at is not null as t from tasks where id = ${stale}`;
  expect(row).toEqual({ w: true, t: false });
  expect(await pools.counts(put.pool)).toMatchObject({ solved: 3, handedOut: 2, wasted: 1, ready: 0 });
});

test("the keeper's lock: a second round while one holds it is skipped", async () => {
  const pools = createPoolStore(gateway.db);
  const put = await pools.put("client-a", "lock", cfg(1), 20);
  if (!("pool" in put)) throw new Error("not created");
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  let entered!: () => void;
  const inside = new Promise<void>((r) => {
    entered = r;
  });
  const first = pools.withLock(put.pool, async () => {
    entered();
    await held;
  });
  await inside;
  expect(await pools.withLock(put.pool, async () => {})).toBe(false);
  release();
  expect(await first).toBe(true);
  expect(await pools.withLock(put.pool, async () => {})).toBe(true);
});

test("the cap per client holds under concurrent PUTs; another owner sees nothing; a new type replaces the pool", async () => {
  const pools = createPoolStore(gateway.db);
  const results = await Promise.all(Array.from({ length: 8 }, (_, i) => pools.put("client-cap", `p${i}`, cfg(1), 5)));
  expect(results.filter((r) => "pool" in r).length).toBe(5);
  expect(results.filter((r) => "limit" in r).length).toBe(3);
  expect((await pools.list("client-cap")).length).toBe(5);
  expect(await pools.get("client-other", "p0")).toBeUndefined();
  expect(await pools.remove("client-other", "p0")).toBeUndefined();
  const before = (await pools.list("client-cap")).map((p) => p.name)[0]!;
  const same = await pools.put("client-cap", before, { ...cfg(4) }, 5);
  expect("pool" in same && !same.created && same.pool.size === 4).toBe(true);
  const old = await pools.get("client-cap", before);
  const other = await pools.put("client-cap", before, { ...cfg(1), type: "recaptcha_v2" }, 5);
  expect("pool" in other && other.pool.id !== old!.id && other.pool.type === "recaptcha_v2").toBe(true);
  expect((await pools.list("client-cap")).length).toBe(5);
  const closed = await pools.remove("client-cap", before);
  expect(closed?.id).toBe("pool" in other ? other.pool.id : "");
  expect(await pools.get("client-cap", before)).toBeUndefined();
});
