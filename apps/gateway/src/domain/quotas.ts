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
    /** By client id (what `GET /v1/usage` and `GET /v1/webhook-secret` show: 32 hex characters with API_KEY_PEPPER, 16 legacy), never by key. */
    keys: z
      .record(
        z
          .string()
          .regex(/^(?:[0-9a-f]{16}|[0-9a-f]{32})$/, "must be a client id (32 hex characters, or 16 for a legacy id)"),
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
   * Tasks of `owners` (a client's ids: during the transition to peppered ids, its legacy id too) created in [from, dayEnd), counted by type, split at `settledTo` = the
   * database's now() - settleMs (at least `from`, at most `dayEnd`): rows before it are counted
   * for good (`settled`), rows after it are re-read next time.
   */
  createdSince(
    owners: readonly string[],
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
  ownersOf?: (clientId: string) => readonly string[];
}): Quotas {
  const cfg = o.config ?? { default: {}, keys: {} };
  const prices = o.prices ?? {};
  const refreshMs = o.refreshMs ?? 2000;
  const now = o.now ?? Date.now;
  // A client's rows, and its QUOTAS entry, may still be under its legacy id during the transition to peppered ids (issue 14.8).
  const ownersOf = o.ownersOf ?? ((clientId: string) => [clientId]);
  const limitsOf = (clientId: string) => ({
    ...cfg.default,
    ...cfg.keys[ownersOf(clientId).find((id) => cfg.keys[id]) ?? clientId],
  });
  const priceOf = (type: string) => prices[type as TaskType] ?? 0;
  const dayOf = (t: number) => Math.floor(t / DAY_MS);
  const needsOpen = [cfg.default, ...Object.values(cfg.keys)].some((q) => q.maxInFlight !== undefined);
  const needsSpend = [cfg.default, ...Object.values(cfg.keys)].some((q) => q.dailySpend !== undefined);

  // In flight: one grouped read for every key, plus what this gateway counted since it started.
  let open: { at: number; counts: Map<string, number>; read?: Promise<void> } = { at: -Infinity, counts: new Map() };
  const openLocal = new Map<string, number>();
  const readOpen = async () => {
    if (now() - open.at < refreshMs) return;
    if (!open.read) {
      open.read = (async () => {
        // Counted from here on by the read itself.
        const pendingLocal = new Map(openLocal);
        const counts = await o.source.openByOwner();
        for (const [k, v] of pendingLocal) openLocal.set(k, (openLocal.get(k) ?? 0) - v);
        open = { at: now(), counts };
      })().finally(() => {
        open.read = undefined;
      });
    }
    await open.read;
  };
  const inFlightOf = (clientId: string) =>
    Math.max(
      0,
      ownersOf(clientId).reduce((n, id) => n + (open.counts.get(id) ?? 0), 0) + (openLocal.get(clientId) ?? 0),
    );

  // Spend: per key and UTC day, rows settled for good + rows still recent + local charges since the read.
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
  const spends = new Map<string, Spend>();
  const spendOf = (clientId: string): Spend => {
    const day = dayOf(now());
    let s = spends.get(clientId);
    if (!s || s.day !== day) {
      s = { day, settledTo: day * DAY_MS, settled: 0, recent: 0, local: 0, redrives: 0, at: -Infinity };
      spends.set(clientId, s);
    }
    return s;
  };
  const readSpend = async (clientId: string) => {
    const s = spendOf(clientId);
    if (now() - s.at < refreshMs) return;
    if (!s.read) {
      s.read = (async () => {
        const localBefore = s.local;
        const { settledTo, rows } = await o.source.createdSince(
          ownersOf(clientId),
          new Date(s.settledTo),
          new Date((s.day + 1) * DAY_MS),
          SETTLE_MS,
        );
        let settled = 0;
        let recent = 0;
        for (const r of rows) {
          if (r.settled) settled += priceOf(r.type) * r.n;
          else recent += priceOf(r.type) * r.n;
        }
        s.settled += settled;
        s.settledTo = Math.max(s.settledTo, settledTo.getTime());
        s.recent = recent;
        s.local -= localBefore;
        s.at = now();
      })().finally(() => {
        s.read = undefined;
      });
    }
    await s.read;
  };
  const spentOf = (clientId: string) => {
    const s = spendOf(clientId);
    return s.settled + s.recent + s.local + s.redrives;
  };

  // Submission rate: a token bucket per key, on this gateway.
  const buckets = new Map<string, { tokens: number; at: number }>();
  const takeToken = (clientId: string, rate: number, burst: number): number | undefined => {
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
  const untilMidnight = () => Math.max(1, Math.ceil(((dayOf(now()) + 1) * DAY_MS - now()) / 1000));

  /** In-flight and spend checks shared by submissions and redrives; counts the task when admitted. */
  const admitCounted = async (
    clientId: string,
    q: Quota,
    type: string,
    what: "submit" | "redrive",
  ): Promise<QuotaRefusal | Reservation> => {
    if (q.maxInFlight !== undefined) {
      await readOpen();
      if (inFlightOf(clientId) >= q.maxInFlight)
        return {
          kind: "maxInFlight",
          status: 429,
          field: "quota.maxInFlight",
          message: `this API key has ${q.maxInFlight} tasks in flight, its limit; wait for some to finish`,
          retryAfter: 1,
        };
    }
    const price = priceOf(type);
    if (q.dailySpend !== undefined) {
      await readSpend(clientId);
      if (spentOf(clientId) + price > q.dailySpend + 1e-9)
        return {
          kind: "dailySpend",
          status: 429,
          field: "quota.dailySpend",
          message: `this API key's daily spend limit (${q.dailySpend}) is reached; it resets at 00:00 UTC`,
          retryAfter: untilMidnight(),
        };
    }
    openLocal.set(clientId, (openLocal.get(clientId) ?? 0) + 1);
    const s = spendOf(clientId);
    const day = s.day;
    if (what === "submit") s.local += price;
    else s.redrives += price;
    let released = false;
    return {
      release() {
        if (released) return;
        released = true;
        openLocal.set(clientId, (openLocal.get(clientId) ?? 0) - 1);
        const cur = spendOf(clientId);
        if (cur.day !== day) return;
        if (what === "submit") cur.local -= price;
        else cur.redrives -= price;
      },
    };
  };

  return {
    active: needsOpen || needsSpend,
    async admitSubmit(clientId, req) {
      const q = limitsOf(clientId);
      if (req.priority === "high" && q.highLane === false)
        return {
          kind: "highLane",
          status: 403,
          field: "priority",
          message: "this API key may not use the high lane; submit with priority normal or low",
        };
      if (q.submitsPerSecond !== undefined) {
        const wait = takeToken(clientId, q.submitsPerSecond, q.burst ?? Math.max(1, Math.ceil(q.submitsPerSecond)));
        if (wait !== undefined)
          return {
            kind: "submitsPerSecond",
            status: 429,
            field: "quota.submitsPerSecond",
            message: `this API key may submit ${q.submitsPerSecond} tasks per second`,
            retryAfter: wait,
          };
      }
      return admitCounted(clientId, q, req.type, "submit");
    },
    async admitRedrive(clientId, task) {
      const q = limitsOf(clientId);
      if (q.maxRedrives !== undefined && task.redrives >= q.maxRedrives)
        return {
          kind: "maxRedrives",
          status: 403,
          field: "path.id",
          message: `this task was redriven ${task.redrives} times, the limit of this API key`,
        };
      return admitCounted(clientId, q, task.type, "redrive");
    },
    async usage(clientId) {
      await Promise.all([readOpen(), readSpend(clientId)]);
      const q = limitsOf(clientId);
      return {
        clientId,
        day: new Date(dayOf(now()) * DAY_MS).toISOString().slice(0, 10),
        inFlight: inFlightOf(clientId),
        spendToday: Math.round(spentOf(clientId) * 1e6) / 1e6,
        limits: { ...q, highLane: q.highLane ?? true },
        prices,
      };
    },
  };
}
