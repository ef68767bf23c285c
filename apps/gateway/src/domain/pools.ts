// Warm pools (docs/warm-pools.md): what a pool is, how it is checked, and the keeper's pure rule of
// how many tasks to start so that `size` tokens stay ready, each replaced before it expires.
import { Priority, RecaptchaV2Params, RecaptchaV3Params, TurnstileParams } from "@pipeline/shared/schemas";
import { z } from "zod";

/** The task types a pool may hold: the token types (a token of the same sitekey + pageurl serves any later request). */
export const PoolType = z.enum(["recaptcha_v2", "recaptcha_v3", "turnstile"]);
export type PoolType = z.infer<typeof PoolType>;

/** How long a token of the type is accepted by the site that issued it, in seconds. */
export const TOKEN_LIFE_SECONDS: Record<PoolType, number> = { recaptcha_v2: 120, recaptcha_v3: 120, turnstile: 300 };

/** The default `maxAgeSeconds`: the token's life less 10 s, the margin a client needs to use it. */
export const DEFAULT_MAX_AGE_SECONDS: Record<PoolType, number> = {
  recaptcha_v2: 110,
  recaptcha_v3: 110,
  turnstile: 290,
};

export const POOL_SIZE_MAX = 50;

/** A pool's name: the last segment of `/v1/pools/:name`. */
export const PoolName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9_.-]+$/, "1-64 letters, digits, '-', '_' or '.'");

const common = {
  size: z.int().min(1).max(POOL_SIZE_MAX),
  maxAgeSeconds: z.int().min(1).optional(),
  priority: Priority.optional(),
};

/** `PUT /v1/pools/:name`: the params are exactly what `POST /v1/tasks` takes for the type. */
export const PoolBody = z
  .discriminatedUnion("type", [
    z.strictObject({ type: z.literal("recaptcha_v2"), params: RecaptchaV2Params, ...common }),
    z.strictObject({ type: z.literal("recaptcha_v3"), params: RecaptchaV3Params, ...common }),
    z.strictObject({ type: z.literal("turnstile"), params: TurnstileParams, ...common }),
  ])
  .superRefine((b, ctx) => {
    const life = TOKEN_LIFE_SECONDS[b.type];
    if (b.maxAgeSeconds !== undefined && b.maxAgeSeconds > life)
      ctx.addIssue({
        code: "custom",
        path: ["maxAgeSeconds"],
        message: `at most ${life} for ${b.type} (the token's life)`,
      });
  });
export type PoolBody = z.infer<typeof PoolBody>;

/** A pool's settings as stored: the body with its defaults filled in. */
export interface PoolConfig {
  type: PoolType;
  params: Record<string, unknown>;
  priority: Priority;
  size: number;
  maxAgeMs: number;
}

export function poolConfig(b: PoolBody): PoolConfig {
  return {
    type: b.type,
    params: b.params as Record<string, unknown>,
    priority: b.priority ?? "normal",
    size: b.size,
    maxAgeMs: (b.maxAgeSeconds ?? DEFAULT_MAX_AGE_SECONDS[b.type]) * 1000,
  };
}

/** What the keeper sees of a pool at one tick. */
export interface PoolState {
  size: number;
  maxAgeMs: number;
  /** When each ready token (solved, not handed out, not wasted) was solved, epoch ms. */
  readySolvedAt: readonly number[];
  /** The pool's tasks not final yet (queued, solving, retrying). */
  inProgress: number;
  /** The pool's latest tasks that failed, counted back from the newest to its newest solved one. */
  failedStreak: number;
  /** When the newest of them failed, epoch ms (null: none). */
  lastFailedAtMs: number | null;
}

export interface RefillPlan {
  /** Ready tokens still within maxAge a lead from now (they need no replacement yet). */
  lasting: number;
  /** Tasks to submit now. */
  submit: number;
  /** Backing off a failing pool: no task before this instant, epoch ms (then one, a probe). */
  backoffUntilMs?: number;
}

/** The longest wait between two probes of a failing pool. */
export const POOL_BACKOFF_MAX_MS = 5 * 60_000;

/**
 * The wait after a failing pool's newest failure before its next probe: once `size` tasks in a
 * row failed (a wrong sitekey, a page the provider refuses), two ticks, doubled by each probe that
 * failed since, at most POOL_BACKOFF_MAX_MS. Undefined: the pool is not failing (fewer in a row).
 */
export function refillBackoffMs(failedStreak: number, size: number, tickMs: number): number | undefined {
  if (failedStreak < size) return undefined;
  const probesFailed = Math.min(30, failedStreak - size);
  return Math.min(POOL_BACKOFF_MAX_MS, 2 * tickMs * 2 ** probesFailed);
}

/**
 * How many tasks to start: enough that the ready tokens that will still be valid `leadMs` from now
 * (the time a replacement takes) plus the tasks still solving reach `size`. A token is thus
 * replaced one solve time before it expires, and the tasks in flight never exceed `size`.
 *
 * A failing pool (refillBackoffMs) is not refilled at every tick: it gets one task, a probe, once
 * the backoff after its newest failure has passed and nothing of it is in flight; a probe that
 * is solved ends the streak, and the next tick refills as usual.
 */
export function planRefill(p: PoolState, nowMs: number, leadMs: number, tickMs: number): RefillPlan {
  const lasting = p.readySolvedAt.filter((t) => t + p.maxAgeMs > nowMs + leadMs).length;
  const submit = Math.max(0, p.size - lasting - p.inProgress);
  const backoff = refillBackoffMs(p.failedStreak, p.size, tickMs);
  if (backoff === undefined || submit === 0) return { lasting, submit };
  const backoffUntilMs = (p.lastFailedAtMs ?? nowMs) + backoff;
  if (nowMs < backoffUntilMs || p.inProgress > 0) return { lasting, submit: 0, backoffUntilMs };
  return { lasting, submit: 1, backoffUntilMs };
}

/**
 * The lead a replacement needs: the type's measured p90 (queued to token), else the default
 * solve time, plus one keeper tick (the replacement may start up to a tick late).
 */
export function refillLeadMs(p90Ms: number | undefined, defaultSolveMs: number, tickMs: number): number {
  return (p90Ms ?? defaultSolveMs) + tickMs;
}

/** A pool's counts (from its tasks) and the figures derived from them. */
export interface PoolCounts {
  solved: number;
  handedOut: number;
  wasted: number;
  inProgress: number;
  ready: number;
  failed: number;
  misses: number;
}

export interface PoolFigures extends PoolCounts {
  /** price x solved (TASK_PRICES), micro-dollars; null without a price for the type. */
  spendMicros: number | null;
  /** spend / handedOut, micro-dollars; null without a price or before a hand-out. */
  costPerHandedOutMicros: number | null;
  /** Takes served from the pool / all takes; null before the first take. */
  hitRate: number | null;
}

/** Derives spend, cost per token handed out and hit rate; `priceUsd` is TASK_PRICES of the type. */
export function poolFigures(c: PoolCounts, priceUsd: number | undefined): PoolFigures {
  const spendMicros = priceUsd === undefined ? null : Math.round(priceUsd * 1_000_000) * c.solved;
  const takes = c.handedOut + c.misses;
  return {
    ...c,
    spendMicros,
    costPerHandedOutMicros: spendMicros === null || c.handedOut === 0 ? null : Math.round(spendMicros / c.handedOut),
    hitRate: takes === 0 ? null : c.handedOut / takes,
  };
}
