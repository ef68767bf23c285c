import { describe, expect, test } from "bun:test";
import {
  createQuotas,
  isRefusal,
  type QuotaRefusal,
  QuotasConfig,
  type Reservation,
  type UsageSource,
} from "./quotas.ts";

const A = "aaaaaaaaaaaaaaaa";
const B = "bbbbbbbbbbbbbbbb";
const DAY = 86_400_000;

function fakeSource() {
  const open = new Map<string, number>();
  const created: Array<{ owner: string; type: string; at: number }> = [];
  let reads = { open: 0, spend: 0 };
  let clock = 0;
  const source: UsageSource = {
    async openByOwner() {
      reads.open++;
      return new Map(open);
    },
    async createdSince(owner, from, dayEnd, settleMs) {
      reads.spend++;
      const settledTo = Math.max(from.getTime(), Math.min(clock - settleMs, dayEnd.getTime()));
      const rows = new Map<string, { type: string; settled: boolean; n: number }>();
      for (const r of created) {
        if (r.owner !== owner || r.at < from.getTime() || r.at >= dayEnd.getTime()) continue;
        const settled = r.at < settledTo;
        const k = `${r.type}:${settled}`;
        rows.set(k, { type: r.type, settled, n: (rows.get(k)?.n ?? 0) + 1 });
      }
      return { settledTo: new Date(settledTo), rows: [...rows.values()] };
    },
  };
  return {
    source,
    open,
    created,
    reads: () => reads,
    resetReads: () => (reads = { open: 0, spend: 0 }),
    setClock: (t: number) => (clock = t),
  };
}

const refusal = (r: QuotaRefusal | Reservation) => (isRefusal(r) ? r : undefined);

describe("per API key quotas (issue 14.6)", () => {
  test("the submission rate is a token bucket per key: a burst, then 429 with Retry-After; another key is not affected", async () => {
    let t = 10 * DAY;
    const f = fakeSource();
    const q = createQuotas({
      config: QuotasConfig.parse({ default: { submitsPerSecond: 2, burst: 3 } }),
      source: f.source,
      now: () => t,
    });
    for (let i = 0; i < 3; i++)
      expect(refusal(await q.admitSubmit(A, { type: "turnstile", priority: "normal" }))).toBeUndefined();
    const r = refusal(await q.admitSubmit(A, { type: "turnstile", priority: "normal" }));
    expect(r).toMatchObject({ kind: "submitsPerSecond", status: 429, field: "quota.submitsPerSecond", retryAfter: 1 });
    expect(refusal(await q.admitSubmit(B, { type: "turnstile", priority: "normal" }))).toBeUndefined();
    t += 500; // one token back
    expect(refusal(await q.admitSubmit(A, { type: "turnstile", priority: "normal" }))).toBeUndefined();
    expect(refusal(await q.admitSubmit(A, { type: "turnstile", priority: "normal" }))).toBeDefined();
    // No limit needing figures: nothing was read from the database.
    expect(f.reads()).toEqual({ open: 0, spend: 0 });
  });

  test("tasks in flight: the database's count plus this gateway's own since the read; a release gives the slot back; reads at most once per interval", async () => {
    let t = 10 * DAY;
    const f = fakeSource();
    f.open.set(A, 3);
    const q = createQuotas({
      config: QuotasConfig.parse({ default: { maxInFlight: 5 }, keys: { [B]: { maxInFlight: 1 } } }),
      source: f.source,
      refreshMs: 2000,
      now: () => t,
    });
    const one = await q.admitSubmit(A, { type: "turnstile", priority: "normal" });
    expect(refusal(one)).toBeUndefined();
    expect(refusal(await q.admitSubmit(A, { type: "turnstile", priority: "normal" }))).toBeUndefined();
    expect(refusal(await q.admitSubmit(A, { type: "turnstile", priority: "normal" }))).toMatchObject({
      kind: "maxInFlight",
      status: 429,
      field: "quota.maxInFlight",
      retryAfter: 1,
    });
    (one as Reservation).release();
    expect(refusal(await q.admitSubmit(A, { type: "turnstile", priority: "normal" }))).toBeUndefined();
    // A key's own entry is laid over the default.
    expect(refusal(await q.admitSubmit(B, { type: "turnstile", priority: "normal" }))).toBeUndefined();
    expect(refusal(await q.admitSubmit(B, { type: "turnstile", priority: "normal" }))).toMatchObject({
      kind: "maxInFlight",
    });
    expect(f.reads().open).toBe(1);
    // The next read sees tasks finished (and this gateway's acceptances, now in the table): not counted twice.
    f.open.set(A, 2);
    t += 2000;
    expect((await q.usage(A)).inFlight).toBe(2);
    expect(f.reads().open).toBe(2);
  });

  test("the daily spend in provider money: each accepted task costs its type's price; past the cap 429 until 00:00 UTC; a new day starts at 0", async () => {
    let t = 10 * DAY + 3600_000 * 23; // 23:00 UTC
    const f = fakeSource();
    f.setClock(t);
    // Spent earlier today through another gateway: 3 image tasks (0.5 each).
    for (let i = 0; i < 3; i++) f.created.push({ owner: A, type: "image", at: 10 * DAY + 1000 * i });
    const q = createQuotas({
      config: QuotasConfig.parse({ default: { dailySpend: 2.5 } }),
      prices: { image: 0.5, turnstile: 0.25 },
      source: f.source,
      now: () => t,
    });
    expect(refusal(await q.admitSubmit(A, { type: "image", priority: "normal" }))).toBeUndefined(); // 2.0
    expect(refusal(await q.admitSubmit(A, { type: "turnstile", priority: "normal" }))).toBeUndefined(); // 2.25
    expect(refusal(await q.admitSubmit(A, { type: "turnstile", priority: "normal" }))).toBeUndefined(); // 2.5
    const r = refusal(await q.admitSubmit(A, { type: "turnstile", priority: "normal" }));
    expect(r).toMatchObject({ kind: "dailySpend", status: 429, field: "quota.dailySpend", retryAfter: 3600 });
    expect((await q.usage(A)).spendToday).toBe(2.5);
    // Another key has its own figure.
    expect(refusal(await q.admitSubmit(B, { type: "image", priority: "normal" }))).toBeUndefined();
    t = 11 * DAY + 60_000;
    f.setClock(t);
    expect(refusal(await q.admitSubmit(A, { type: "image", priority: "normal" }))).toBeUndefined();
    expect((await q.usage(A)).spendToday).toBe(0.5);
  });

  test("spend reads are incremental: rows counted for good are not read again, recent rows are re-read without being counted twice", async () => {
    let t = 10 * DAY + 3600_000;
    const f = fakeSource();
    f.setClock(t);
    const q = createQuotas({
      config: QuotasConfig.parse({ default: { dailySpend: 100 } }),
      prices: { turnstile: 1 },
      source: f.source,
      refreshMs: 1000,
      now: () => t,
    });
    for (let i = 0; i < 5; i++) f.created.push({ owner: A, type: "turnstile", at: t - 60_000 + i });
    for (let i = 0; i < 2; i++) f.created.push({ owner: A, type: "turnstile", at: t - 1000 + i }); // not settled yet
    expect((await q.usage(A)).spendToday).toBe(7);
    for (let step = 0; step < 5; step++) {
      t += 5000;
      f.setClock(t);
      expect((await q.usage(A)).spendToday).toBe(7);
    }
    f.created.push({ owner: A, type: "turnstile", at: t - 10 });
    t += 1000;
    f.setClock(t);
    expect((await q.usage(A)).spendToday).toBe(8);
  });

  test("the high lane is a right (403 naming priority); redrives per task are limited (403 naming path.id) and a redrive costs a solve", async () => {
    const t = 10 * DAY;
    const f = fakeSource();
    f.setClock(t);
    const q = createQuotas({
      config: QuotasConfig.parse({ default: { highLane: false, maxRedrives: 2, dailySpend: 10 } }),
      prices: { turnstile: 1 },
      source: f.source,
      now: () => t,
    });
    expect(refusal(await q.admitSubmit(A, { type: "turnstile", priority: "high" }))).toMatchObject({
      kind: "highLane",
      status: 403,
      field: "priority",
    });
    expect(refusal(await q.admitSubmit(A, { type: "turnstile", priority: "normal" }))).toBeUndefined();
    expect(refusal(await q.admitRedrive(A, { type: "turnstile", redrives: 1 }))).toBeUndefined();
    expect(refusal(await q.admitRedrive(A, { type: "turnstile", redrives: 2 }))).toMatchObject({
      kind: "maxRedrives",
      status: 403,
      field: "path.id",
    });
    expect((await q.usage(A)).spendToday).toBe(2);
    expect((await q.usage(A)).limits).toMatchObject({ highLane: false, maxRedrives: 2, dailySpend: 10 });
  });

  test("QUOTAS names the field at fault; keys are client ids, never keys", () => {
    expect(QuotasConfig.safeParse({ default: { maxInFlight: -1 } }).error?.issues[0]?.path).toEqual([
      "default",
      "maxInFlight",
    ]);
    expect(QuotasConfig.safeParse({ keys: { "client-a-key": {} } }).success).toBe(false);
    expect(QuotasConfig.safeParse({ default: { maxInflight: 3 } }).success).toBe(false);
  });
});

test("one client id per key: its figures count only the rows it owns, and only its own QUOTAS entry applies (issue 14.8)", async () => {
  const t = 10 * DAY + 60_000;
  const NEW = "0123456789abcdef0123456789abcdef";
  const f = fakeSource();
  f.setClock(t);
  f.open.set(NEW, 1);
  f.open.set(A, 2);
  f.created.push(
    { owner: NEW, type: "turnstile", at: 10 * DAY + 1 },
    { owner: A, type: "turnstile", at: 10 * DAY + 2 },
    { owner: B, type: "turnstile", at: 10 * DAY + 3 },
  );
  const config = QuotasConfig.parse({
    default: { maxInFlight: 2 },
    keys: { [A]: { maxInFlight: 4, dailySpend: 10 } },
  });
  const q = createQuotas({ config, prices: { turnstile: 1 }, source: f.source, now: () => t });
  expect(await q.usage(NEW)).toMatchObject({ clientId: NEW, inFlight: 1, spendToday: 1, limits: { maxInFlight: 2 } });
  expect((await q.usage(NEW)).limits.dailySpend).toBeUndefined();
  expect(refusal(await q.admitSubmit(NEW, { type: "turnstile", priority: "normal" }))).toBeUndefined();
  expect(refusal(await q.admitSubmit(NEW, { type: "turnstile", priority: "normal" }))).toMatchObject({
    kind: "maxInFlight",
  });
});
