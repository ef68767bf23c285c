// Warm pools end to end (docs/warm-pools.md): a pool keeps `size` solved tokens ready through the
// ordinary pipeline (real NATS JetStream and Postgres, the emulator as the provider), a take hands
// one out at once and exactly once, the keeper refills and replaces tokens before they expire, an
// empty pool's take is a task of the client's own, another key sees nothing, bad bodies are 400s,
// and the pool's spend is what the provider charged.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { eventually } from "@pipeline/devstack/testing";
import type { TaskView } from "@pipeline/shared/schemas";
import { api, type Stack, startStack } from "./harness.ts";

const OTHER_KEY = "e2e-client-key-0002";
/** The emulator's price of a Turnstile solve and the gateway's TASK_PRICES of it: the same. */
const PRICE_USD = 0.0015;
const PRICE_MICROS = 1500;
const SOLVE_MS = 1500;
let s: Stack;

beforeAll(async () => {
  s = await startStack({
    region: "pools",
    emulator: { latencyMs: { turnstile: SOLVE_MS }, prices: { turnstile: PRICE_USD } },
    gatewayEnv: {
      API_KEYS: `e2e-client-key-0001,${OTHER_KEY}`,
      TASK_PRICES: JSON.stringify({ turnstile: PRICE_USD }),
      POOL_TICK_MS: "200",
      // Nothing measured at first: a replacement is assumed to take 2 s (+ a tick).
      SCHEDULE_DEFAULT_SOLVE_MS: "2000",
      POOL_MAX_PER_CLIENT: "4",
    },
    solverEnv: { FIRST_POLL_MS: "300", POLL_INTERVAL_MS: "200" },
  });
}, 60_000);
afterAll(() => s?.stop(), 30_000);

const params = (tag: string) => ({ sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/${tag}` });

interface PoolView {
  name: string;
  size: number;
  maxAgeSeconds: number;
  solved: number;
  handedOut: number;
  wasted: number;
  inProgress: number;
  ready: number;
  failed: number;
  misses: number;
  hitRate: number | null;
  spendMicros: number | null;
  costPerHandedOutMicros: number | null;
  ledgerSpendMicros: number;
}
interface Problem {
  status: number;
  errors?: { field: string; message: string }[];
}

const put = (name: string, body: unknown, key?: string) =>
  api<PoolView & Problem>(s, `/v1/pools/${name}`, {
    method: "PUT",
    body,
    ...(key ? { headers: { authorization: `Bearer ${key}` } } : {}),
  });
const get = (name: string, key?: string) =>
  api<PoolView>(s, `/v1/pools/${name}`, key ? { headers: { authorization: `Bearer ${key}` } } : {});
const take = (name: string, key?: string) =>
  api<{ pool: string; token?: string; taskId?: string; ageMs?: number; id?: string; status?: string }>(
    s,
    `/v1/pools/${name}/take`,
    { method: "POST", ...(key ? { headers: { authorization: `Bearer ${key}` } } : {}) },
  );
const fieldOf = (r: { body: Problem }) => r.body.errors?.[0]?.field;

test("bad bodies are 400 problems naming the field, and nothing is stored", async () => {
  expect(fieldOf(await put("p1", { type: "turnstile", params: params("b"), size: 0 }))).toBe("size");
  expect(fieldOf(await put("p1", { type: "turnstile", params: params("b"), size: 51 }))).toBe("size");
  expect(fieldOf(await put("p1", { type: "turnstile", params: { pageurl: "https://e.com/" }, size: 1 }))).toBe(
    "params.sitekey",
  );
  expect(fieldOf(await put("p1", { type: "image", params: {}, size: 1 }))).toBe("type");
  const old = await put("p1", { type: "turnstile", params: params("b"), size: 1, maxAgeSeconds: 301 });
  expect(old.status).toBe(400);
  expect(old.body.errors).toEqual([
    { field: "maxAgeSeconds", message: "at most 300 for turnstile (the token's life)" },
  ]);
  expect(fieldOf(await put("bad%20name", { type: "turnstile", params: params("b"), size: 1 }))).toBe("path.name");
  const [n] = await s.db.sql<{ n: number }[]>`select count(*)::int as n from warm_pools`;
  expect(n!.n).toBe(0);
  expect((await api<{ pools: unknown[] }>(s, "/v1/pools")).body.pools).toEqual([]);
});

test("a pool of 3 fills to 3 ready; two takes answer at once with distinct tokens; it refills", async () => {
  const created = await put("checkout", { type: "turnstile", params: params("checkout"), size: 3 });
  expect(created.status).toBe(201);
  expect(created.body.maxAgeSeconds).toBe(290);
  const t0 = Date.now();
  await eventually(async () => (await get("checkout")).body.ready === 3, 25_000, 100);
  const fillMs = Date.now() - t0;
  const before = (await get("checkout")).body;
  expect(before.inProgress).toBe(0);
  expect(before.solved).toBe(3);
  // Two concurrent takes: each handed a different token, at once (well under a solve).
  const started = Date.now();
  const [a, b] = await Promise.all(
    [0, 1].map(async () => {
      const r = await take("checkout");
      return { ...r, ms: Date.now() - started };
    }),
  );
  for (const r of [a!, b!]) {
    expect(r.status).toBe(200);
    expect(r.body.pool).toBe("hit");
    expect(r.body.token).toBeTruthy();
    expect(r.ms).toBeLessThan(SOLVE_MS);
  }
  expect(a!.body.token).not.toBe(b!.body.token);
  expect(a!.body.taskId).not.toBe(b!.body.taskId);
  // The token is the task's own, handed out once.
  const ids = [String(a!.body.taskId), String(b!.body.taskId)];
  const rows = await s.db.sql<{ token: string; taken: boolean }[]>`
    select token, pool_taken_at is not null as taken from tasks where id = any(${ids}::uuid[]) order by id`;
  expect(rows.map((r) => r.taken)).toEqual([true, true]);
  expect(rows.map((r) => r.token).sort()).toEqual([String(a!.body.token), String(b!.body.token)].sort());
  const r0 = Date.now();
  await eventually(async () => {
    const v = (await get("checkout")).body;
    return v.ready === 3 && v.handedOut === 2 && v.solved === 5;
  }, 20_000);
  console.log(
    `[warm-pools] fill 0->3 ready: ${fillMs} ms; two takes: ${a!.ms} ms and ${b!.ms} ms (emulator solve ${SOLVE_MS} ms); refill 1->3: ${Date.now() - r0} ms`,
  );
}, 60_000);

test("another API key sees no pool: 404 on read, take and delete, an empty list", async () => {
  expect((await get("checkout", OTHER_KEY)).status).toBe(404);
  expect((await take("checkout", OTHER_KEY)).status).toBe(404);
  const del = await api(s, "/v1/pools/checkout", {
    method: "DELETE",
    headers: { authorization: `Bearer ${OTHER_KEY}` },
  });
  expect(del.status).toBe(404);
  const list = await api<{ pools: unknown[] }>(s, "/v1/pools", { headers: { authorization: `Bearer ${OTHER_KEY}` } });
  expect(list.body.pools).toEqual([]);
  expect((await get("checkout")).status).toBe(200);
});

test("a take on an empty pool answers 202 with a task of its own that completes; a miss", async () => {
  expect((await put("cold", { type: "turnstile", params: params("cold"), size: 1 })).status).toBe(201);
  const r = await take("cold");
  expect(r.status).toBe(202);
  expect(r.body.pool).toBe("miss");
  expect(r.body.status).toBe("queued");
  const done = await api<TaskView>(s, `/v1/tasks/${r.body.id}?wait=20`);
  expect(done.body.status).toBe("completed");
  expect(done.body.result?.token).toBeTruthy();
  // The client's own task: not the pool's, never handed out by it.
  const [row] = await s.db.sql<{ pool_id: string | null }[]>`select pool_id from tasks where id = ${r.body.id!}`;
  expect(row!.pool_id).toBeNull();
  const v = (await get("cold")).body;
  expect(v.misses).toBe(1);
  expect(v.hitRate).toBe(0);
});

test("with a short maxAgeSeconds, tokens are replaced before they expire and the wasted count grows", async () => {
  expect((await put("short", { type: "turnstile", params: params("short"), size: 2, maxAgeSeconds: 4 })).status).toBe(
    201,
  );
  const t0 = Date.now();
  const v = await eventually(
    async () => {
      const b = (await get("short")).body;
      return b.wasted >= 4 ? b : undefined;
    },
    30_000,
    200,
  );
  // Never handed out, so wasted; each replaced: solved covers the wasted ones and the ready ones.
  expect(v.handedOut).toBe(0);
  expect(v.solved).toBeGreaterThanOrEqual(v.wasted + v.ready);
  expect(v.inProgress).toBeLessThanOrEqual(2);
  // A take meanwhile is a hit: the replacement was ready before the old token went.
  const hit = await eventually(async () => {
    const r = await take("short");
    return r.status === 200 ? r : undefined;
  }, 10_000);
  expect(hit.body.ageMs).toBeLessThan(4000);
  console.log(
    `[warm-pools] size 2, maxAge 4 s: ${v.wasted} wasted, ${v.solved} solved, ${v.ready} ready after ${Date.now() - t0} ms`,
  );
}, 45_000);

test("more pools than POOL_MAX_PER_CLIENT is a 409; the pool's spend is solved x price, as the provider charged", async () => {
  expect((await put("fourth", { type: "turnstile", params: params("fourth"), size: 1 })).status).toBe(201);
  const over = await put("fifth", { type: "turnstile", params: params("fifth"), size: 1 });
  expect(over.status).toBe(409);
  expect(fieldOf(over)).toBe("path.name");
  // Stop every pool, wait for their last tasks, then compare with the emulator's books.
  for (const name of ["checkout", "cold", "short", "fourth"])
    expect((await api(s, `/v1/pools/${name}`, { method: "DELETE" })).status).toBe(200);
  expect((await get("checkout")).status).toBe(404);
  expect((await take("checkout")).status).toBe(404);
  await eventually(async () => {
    const [r] = await s.db.sql<{ n: number }[]>`
      select count(*)::int as n from tasks where state in ('queued', 'solving', 'retrying')`;
    return r!.n === 0;
  }, 20_000);
  const [pool] = await s.db.sql<{ solved: number; ledger: string }[]>`
    select count(*) filter (where t.state = 'completed')::int as solved,
      (select coalesce(sum(amount_micros), 0) from ledger_all l join tasks p on p.id = l.task_id where p.pool_id is not null)::text as ledger
    from tasks t where t.pool_id is not null`;
  const [all] = await s.db.sql<{ n: number }[]>`select count(*)::int as n from tasks where state = 'completed'`;
  const books = s.emu.books();
  expect(books.totals.charges).toBe(all!.n);
  expect(books.totals.chargedMicros).toBe(all!.n * PRICE_MICROS);
  expect(Number(pool!.ledger)).toBe(pool!.solved * PRICE_MICROS);
  console.log(
    `[warm-pools] emulator charged ${books.totals.charges} solves (${books.totals.chargedMicros} µ$); the pools' tasks: ${pool!.solved} solved, ledger ${pool!.ledger} µ$ = ${pool!.solved} x ${PRICE_MICROS}`,
  );
}, 45_000);

test("a live pool's figures: spend = solved x TASK_PRICES = the ledger's, cost per token handed out", async () => {
  expect((await put("figures", { type: "turnstile", params: params("figures"), size: 2 })).status).toBe(201);
  await eventually(async () => (await get("figures")).body.ready === 2, 20_000, 100);
  expect((await take("figures")).status).toBe(200);
  // Settled (no task of the pool finishing between the two reads): spend and ledger agree.
  const v = await eventually(async () => {
    const b = (await get("figures")).body;
    return b.ready === 2 && b.inProgress === 0 && b.ledgerSpendMicros === b.solved * PRICE_MICROS ? b : undefined;
  }, 20_000);
  expect(v.solved).toBe(3);
  expect(v.spendMicros).toBe(3 * PRICE_MICROS);
  expect(v.costPerHandedOutMicros).toBe(3 * PRICE_MICROS);
  expect(v.hitRate).toBe(1);
  const metrics = await (await fetch(`${s.gatewayMetricsUrl}/metrics`)).text();
  const line = (name: string) => metrics.split("\n").find((l) => l.startsWith(name) && l.includes('/figures"'));
  expect(line("gateway_pool_takes_total")).toMatch(/result="hit".*\} 1$/);
  expect(line("gateway_pool_submitted_total")).toMatch(/\} 3$/);
  expect((await api(s, "/v1/pools/figures", { method: "DELETE" })).status).toBe(200);
}, 45_000);

test("a pool whose tasks all fail backs off to one probe at a time, and fills again once the provider takes its tasks", async () => {
  // Every in.php refused as a wrong sitekey: each task fails at once, nothing is charged.
  s.emu.configure({ faults: { errorRate: 1, errorCode: "ERROR_WRONG_GOOGLEKEY" } });
  let failed: number;
  try {
    expect((await put("failing", { type: "turnstile", params: params("failing"), size: 3 })).status).toBe(201);
    await Bun.sleep(6000);
    failed = (await get("failing")).body.failed;
  } finally {
    s.emu.configure({ faults: {} });
  }
  // Without the backoff the keeper replaced all three at every 200 ms tick: ~90 failed tasks in
  // these 6 s. With it: the first three, then probes 0.4, 0.8, 1.6, 3.2 s apart.
  expect(failed).toBeGreaterThanOrEqual(3);
  expect(failed).toBeLessThanOrEqual(8);
  const healed = Date.now();
  // The next probe (at most 6.4 s away) is solved; the streak ends and the pool fills.
  await eventually(async () => (await get("failing")).body.ready === 3, 30_000, 100);
  console.log(
    `[warm-pools] failing pool of 3: ${failed} failed tasks in 6 s of a refusing provider (a refill at every 200 ms tick: ~90); 3 ready ${Date.now() - healed} ms after it took tasks again`,
  );
  expect((await api(s, "/v1/pools/failing", { method: "DELETE" })).status).toBe(200);
}, 60_000);

const LONG_KEY = `${"k".repeat(249)}-take1`;

test("a take with an Idempotency-Key asked again answers the same: the same task when it missed, the same token when it hit", async () => {
  const takeWith = async (key: string) => {
    const res = await fetch(`${s.gatewayUrl}/v1/pools/idem/take`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.apiKey}`, "idempotency-key": key },
    });
    const body = (await res.json()) as { pool?: string; token?: string; id?: string; errors?: { field: string }[] };
    return { status: res.status, replayed: res.headers.get("idempotent-replayed") === "true", body };
  };
  expect((await takeWith("bad key")).status).toBe(400);
  expect((await takeWith("x".repeat(256))).body.errors?.[0]?.field).toBe("header.idempotency-key");
  expect((await put("idem", { type: "turnstile", params: params("idem"), size: 2 })).status).toBe(201);
  // Nothing ready yet: a miss, the client's own task (a key of the longest kind: its task's key stays short).
  const missed = await takeWith(LONG_KEY);
  expect(missed).toMatchObject({ status: 202, replayed: false, body: { pool: "miss" } });
  await eventually(async () => (await get("idem")).body.ready === 2, 20_000, 100);
  // Asked again once tokens are ready: the same task, no token handed out.
  expect(await takeWith(LONG_KEY)).toMatchObject({
    status: 202,
    replayed: true,
    body: { pool: "miss", id: missed.body.id },
  });
  const hit = await takeWith("take-2");
  expect(hit).toMatchObject({ status: 200, replayed: false, body: { pool: "hit" } });
  expect(await takeWith("take-2")).toMatchObject({ status: 200, replayed: true, body: { token: hit.body.token } });
  const v = (await get("idem")).body;
  expect({ handedOut: v.handedOut, misses: v.misses }).toEqual({ handedOut: 1, misses: 1 });
  expect((await api(s, "/v1/pools/idem", { method: "DELETE" })).status).toBe(200);
}, 45_000);
