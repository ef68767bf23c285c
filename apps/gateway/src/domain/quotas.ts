import { type Priority, TaskType } from "@pipeline/shared/schemas";
import { z } from "zod";

/**
 * Per API key quotas (issue 14.6): a submission rate, tasks in flight, a daily spend in provider
 * money, the right to the `high` lane, and redrives per task. A field left out is not limited.
 */
export const Quota = z
  .object({
    /** New tasks per second (token bucket), with bursts of `burst` (default: one second's worth). */
    submitsPerSecond: z.number().positive().max(1_000_000).optional(),
    burst: z.number().int().min(1).max(10_000_000).optional(),
    /** Tasks not yet final (queued, solving, retrying) at once. */
    maxInFlight: z.number().int().min(0).optional(),
    /** Provider money per UTC day: each accepted task and each redrive costs TASK_PRICES[type]. */
    dailySpend: z.number().min(0).optional(),
    /** May submit with `priority: "high"` (default true). */
    highLane: z.boolean().optional(),
    /** Redrives (`POST /v1/tasks/:id/retry`) per task. */
    maxRedrives: z.number().int().min(0).optional(),
  })
  .strict();
export type Quota = z.infer<typeof Quota>;

/** `QUOTAS`: `{"default": {…}, "keys": {"<client id>": {…}}}`; a key's entry is laid over the default. */
export const QuotasConfig = z
  .object({
    default: Quota.default({}),
    /** By client id (what `GET /v1/usage` and `GET /v1/webhook-secret` show: 32 hex characters with API_KEY_PEPPER, 16 without), never by key. */
    keys: z
      .record(
        z
          .string()
          .regex(
            /^(?:[0-9a-f]{16}|[0-9a-f]{32})$/,
            "must be a client id (32 hex characters, or 16 for an unpeppered id)",
          ),
        Quota,
      )
      .default({}),
  })
  .strict();
export type QuotasConfig = z.infer<typeof QuotasConfig>;

/** `TASK_PRICES`: provider money per solve, by task type. */
export const TaskPrices = z.partialRecord(TaskType, z.number().min(0).max(1000));
export type TaskPrices = z.infer<typeof TaskPrices>;

export type QuotaKind = "submitsPerSecond" | "maxInFlight" | "dailySpend" | "highLane" | "maxRedrives";

/** A refused request: 429 with Retry-After for a limit that lifts by itself, 403 for a right. */
export interface QuotaRefusal {
  kind: QuotaKind;
  status: 429 | 403;
  field: string;
  message: string;
  retryAfter?: number;
}

/** What a key's figures are read from (Postgres in the service; a fake in tests). */
export interface UsageSource {
  /** Tasks not final, by owner (one grouped read for every key). */
  openByOwner(): Promise<Map<string, number>>;
  /**
   * Tasks of `owner` (a client id) created in [from, dayEnd), counted by type, split at `settledTo` = the
   * database's now() - settleMs (at least `from`, at most `dayEnd`): rows before it are counted
   * for good (`settled`), rows after it are re-read next time.
   */
  createdSince(
    owner: string,
    from: Date,
    dayEnd: Date,
    settleMs: number,
  ): Promise<{ settledTo: Date; rows: Array<{ type: string; settled: boolean; n: number }> }>;
}

export interface Reservation {
  /** The task was not accepted after all (a replay, a failed publish): give back what was counted. */
  release(): void;
}

export interface Usage {
  clientId: string;
  day: string;
  inFlight: number;
  spendToday: number;
  limits: Quota & { highLane: boolean };
  prices: TaskPrices;
}

export interface Quotas {
  /** Checks a new submission; on success its rate token is taken and it is counted (in flight, spend) until released. */
  admitSubmit(clientId: string, req: { type: string; priority: Priority }): Promise<QuotaRefusal | Reservation>;
  admitRedrive(clientId: string, task: { type: string; redrives: number }): Promise<QuotaRefusal | Reservation>;
  usage(clientId: string): Promise<Usage>;
  /** Whether any limit needs figures from the database. */
  readonly active: boolean;
}

const DAY_MS = 86_400_000;
/** A row is counted for good once it is older than this (its insert has surely committed); newer rows are re-read each time. */
const SETTLE_MS = 10_000;

export function isRefusal(r: QuotaRefusal | Reservation): r is QuotaRefusal {
  return "kind" in r;
}

/** How a key is read: its limits (its QUOTAS entry over the default), a task type's price. */
interface QuotaLookup {
  limitsOf: (clientId: string) => Quota;
  priceOf: (type: string) => number;
}

function quotaLookup(cfg: QuotasConfig, prices: TaskPrices): QuotaLookup {
  return {
    limitsOf: (clientId) => ({ ...cfg.default, ...cfg.keys[clientId] }),
    priceOf: (type) => prices[type as TaskType] ?? 0,
  };
}

/** Whether any limit of `cfg` sets `field` (so its figures must be read). */
const anyLimits = (cfg: QuotasConfig, field: "maxInFlight" | "dailySpend") =>
  [cfg.default, ...Object.values(cfg.keys)].some((q) => q[field] !== undefined);

const dayOf = (t: number) => Math.floor(t / DAY_MS);

interface Clock {
  now: () => number;
  refreshMs: number;
}

/** Tasks in flight: one grouped read for every key, plus what this gateway counted since that read. */
interface OpenCounts {
  read(): Promise<void>;
  inFlightOf(clientId: string): number;
  /** This gateway's own acceptance (+1) or release (-1) of a task of `clientId`. */
  count(clientId: string, delta: number): void;
}

function createOpenCounts(source: UsageSource, clock: Clock): OpenCounts {
  let open: { at: number; counts: Map<string, number>; read?: Promise<void> } = { at: -Infinity, counts: new Map() };
  const openLocal = new Map<string, number>();
  const readNow = async () => {
    // Counted from here on by the read itself.
    const pendingLocal = new Map(openLocal);
    const counts = await source.openByOwner();
    for (const [k, v] of pendingLocal) openLocal.set(k, (openLocal.get(k) ?? 0) - v);
    open = { at: clock.now(), counts };
  };
  return {
    async read() {
      if (clock.now() - open.at < clock.refreshMs) return;
      if (!open.read) {
        open.read = readNow().finally(() => {
          open.read = undefined;
        });
      }
      await open.read;
    },
    inFlightOf: (clientId) => Math.max(0, (open.counts.get(clientId) ?? 0) + (openLocal.get(clientId) ?? 0)),
    count(clientId, delta) {
      openLocal.set(clientId, (openLocal.get(clientId) ?? 0) + delta);
    },
  };
}

/** A key's spend on one UTC day: rows settled for good + rows still recent + local charges since the read. */
interface Spend {
  day: number;
  settledTo: number;
  settled: number;
  recent: number;
  local: number;
  redrives: number;
  at: number;
  read?: Promise<void>;
}

interface SpendLedger {
  /** Today's entry of `clientId` (a new one at a new UTC day). */
  spendOf(clientId: string): Spend;
  read(clientId: string): Promise<void>;
  spentOf(clientId: string): number;
}

function createSpendLedger(source: UsageSource, clock: Clock, lookup: QuotaLookup): SpendLedger {
  const spends = new Map<string, Spend>();
  const spendOf = (clientId: string): Spend => {
    const day = dayOf(clock.now());
    let s = spends.get(clientId);
    if (!s || s.day !== day) {
      s = { day, settledTo: day * DAY_MS, settled: 0, recent: 0, local: 0, redrives: 0, at: -Infinity };
      spends.set(clientId, s);
    }
    return s;
  };
  const readNow = async (clientId: string, s: Spend) => {
    const localBefore = s.local;
    const { settledTo, rows } = await source.createdSince(
      clientId,
      new Date(s.settledTo),
      new Date((s.day + 1) * DAY_MS),
      SETTLE_MS,
    );
    let settled = 0;
    let recent = 0;
    for (const r of rows) {
      if (r.settled) settled += lookup.priceOf(r.type) * r.n;
      else recent += lookup.priceOf(r.type) * r.n;
    }
    s.settled += settled;
    s.settledTo = Math.max(s.settledTo, settledTo.getTime());
    s.recent = recent;
    s.local -= localBefore;
    s.at = clock.now();
  };
  return {
    spendOf,
    async read(clientId) {
      const s = spendOf(clientId);
      if (clock.now() - s.at < clock.refreshMs) return;
      if (!s.read) {
        s.read = readNow(clientId, s).finally(() => {
          s.read = undefined;
        });
      }
      await s.read;
    },
    spentOf(clientId) {
      const s = spendOf(clientId);
      return s.settled + s.recent + s.local + s.redrives;
    },
  };
}

/**
 * Submission rate: a token bucket per key, on this gateway. Takes a token of `clientId` and
 * returns undefined, or returns the seconds until one is there.
 */
function createSubmitBuckets(now: () => number) {
  const buckets = new Map<string, { tokens: number; at: number }>();
  return (clientId: string, rate: number, burst: number): number | undefined => {
    const t = now();
    const b = buckets.get(clientId) ?? { tokens: burst, at: t };
    b.tokens = Math.min(burst, b.tokens + ((t - b.at) / 1000) * rate);
    b.at = t;
    buckets.set(clientId, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return undefined;
    }
    return Math.max(1, Math.ceil((1 - b.tokens) / rate));
  };
}

const inFlightRefusal = (max: number): QuotaRefusal => ({
  kind: "maxInFlight",
  status: 429,
  field: "quota.maxInFlight",
  message: `this API key has ${max} tasks in flight, its limit; wait for some to finish`,
  retryAfter: 1,
});

const dailySpendRefusal = (limit: number, now: number): QuotaRefusal => ({
  kind: "dailySpend",
  status: 429,
  field: "quota.dailySpend",
  message: `this API key's daily spend limit (${limit}) is reached; it resets at 00:00 UTC`,
  retryAfter: Math.max(1, Math.ceil(((dayOf(now) + 1) * DAY_MS - now) / 1000)),
});

const highLaneRefusal = (): QuotaRefusal => ({
  kind: "highLane",
  status: 403,
  field: "priority",
  message: "this API key may not use the high lane; submit with priority normal or low",
});

const submitRateRefusal = (rate: number, wait: number): QuotaRefusal => ({
  kind: "submitsPerSecond",
  status: 429,
  field: "quota.submitsPerSecond",
  message: `this API key may submit ${rate} tasks per second`,
  retryAfter: wait,
});

const redrivesRefusal = (redrives: number): QuotaRefusal => ({
  kind: "maxRedrives",
  status: 403,
  field: "path.id",
  message: `this task was redriven ${redrives} times, the limit of this API key`,
});

interface CountedDeps {
  open: OpenCounts;
  spend: SpendLedger;
  lookup: QuotaLookup;
  now: () => number;
}

/** Counts an admitted task (in flight, spend) until its reservation is released. */
function reserve(d: CountedDeps, clientId: string, price: number, what: "submit" | "redrive"): Reservation {
  d.open.count(clientId, 1);
  const s = d.spend.spendOf(clientId);
  const day = s.day;
  if (what === "submit") s.local += price;
  else s.redrives += price;
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      d.open.count(clientId, -1);
      const cur = d.spend.spendOf(clientId);
      if (cur.day !== day) return;
      if (what === "submit") cur.local -= price;
      else cur.redrives -= price;
    },
  };
}

/** In-flight and spend checks shared by submissions and redrives; counts the task when admitted. */
async function admitCounted(
  d: CountedDeps,
  clientId: string,
  q: Quota,
  type: string,
  what: "submit" | "redrive",
): Promise<QuotaRefusal | Reservation> {
  if (q.maxInFlight !== undefined) {
    await d.open.read();
    if (d.open.inFlightOf(clientId) >= q.maxInFlight) return inFlightRefusal(q.maxInFlight);
  }
  const price = d.lookup.priceOf(type);
  if (q.dailySpend !== undefined) {
    await d.spend.read(clientId);
    if (d.spend.spentOf(clientId) + price > q.dailySpend + 1e-9) return dailySpendRefusal(q.dailySpend, d.now());
  }
  return reserve(d, clientId, price, what);
}

/**
 * The quota engine. Figures are cheap: the in-flight counts come from one grouped read of the
 * open tasks (their partial index) at most every `refreshMs`, for all keys at once; a key's spend
 * is its rows created today, read incrementally (each read covers only the rows since the last
 * settled point), at most every `refreshMs`. Between reads, this gateway's own acceptances are
 * added locally, so a burst cannot run past a limit on one gateway; other gateways' show up at the
 * next read. Redrives are counted by the gateway that made them (their rows are not new).
 */
export function createQuotas(o: {
  config?: QuotasConfig;
  prices?: TaskPrices;
  source: UsageSource;
  refreshMs?: number;
  now?: () => number;
}): Quotas {
  const cfg = o.config ?? { default: {}, keys: {} };
  const prices = o.prices ?? {};
  const clock: Clock = { now: o.now ?? Date.now, refreshMs: o.refreshMs ?? 2000 };
  const lookup = quotaLookup(cfg, prices);
  const open = createOpenCounts(o.source, clock);
  const spend = createSpendLedger(o.source, clock, lookup);
  const takeToken = createSubmitBuckets(clock.now);
  const counted: CountedDeps = { open, spend, lookup, now: clock.now };

  return {
    active: anyLimits(cfg, "maxInFlight") || anyLimits(cfg, "dailySpend"),
    async admitSubmit(clientId, req) {
      const q = lookup.limitsOf(clientId);
      if (req.priority === "high" && q.highLane === false) return highLaneRefusal();
      if (q.submitsPerSecond !== undefined) {
        const wait = takeToken(clientId, q.submitsPerSecond, q.burst ?? Math.max(1, Math.ceil(q.submitsPerSecond)));
        if (wait !== undefined) return submitRateRefusal(q.submitsPerSecond, wait);
      }
      return admitCounted(counted, clientId, q, req.type, "submit");
    },
    async admitRedrive(clientId, task) {
      const q = lookup.limitsOf(clientId);
      if (q.maxRedrives !== undefined && task.redrives >= q.maxRedrives) return redrivesRefusal(task.redrives);
      return admitCounted(counted, clientId, q, task.type, "redrive");
    },
    async usage(clientId) {
      await Promise.all([open.read(), spend.read(clientId)]);
      const q = lookup.limitsOf(clientId);
      return {
        clientId,
        day: new Date(dayOf(clock.now()) * DAY_MS).toISOString().slice(0, 10),
        inFlight: open.inFlightOf(clientId),
        spendToday: Math.round(spend.spentOf(clientId) * 1e6) / 1e6,
        limits: { ...q, highLane: q.highLane ?? true },
        prices,
      };
    },
  };
}
