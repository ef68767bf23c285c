import type { TaskType } from "@pipeline/shared/schemas";
import type { LiveTiming } from "./runtime-config.ts";

/** The handler's timing: the environment's, of which a config revision may change the live-tunable part (`LiveTiming`). */
export interface HandlerTiming {
  leaseMs: number;
  firstPollMs: number | undefined;
  pollIntervalMs: number;
  maxPolls: number;
  maxResubmits: number;
  maxAttempts: number;
  tokenTtlMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  slotWaitMs: number;
  /** How long an in.php call may take; a taker-over waits this long for a started submit to land. */
  providerTimeoutMs: number;
}

/**
 * The timing in use. Readers call `get()` where they use a value (a poll, a submit), so a config
 * revision is seen from the next use on; `apply(next)` puts a new timing in use (the old one with
 * the live-tunable fields replaced) and never edits one a reader holds.
 */
export interface TimingInUse {
  get(): HandlerTiming;
  apply(next: LiveTiming): void;
}

/** What the worker and its parts are given: they read the timing, the config follower applies it. */
export type TimingReader = Pick<TimingInUse, "get">;

export function timingInUse(initial: HandlerTiming): TimingInUse {
  let current: Readonly<HandlerTiming> = Object.freeze({ ...initial });
  return {
    get: () => current,
    apply(next) {
      current = Object.freeze({
        ...current,
        pollIntervalMs: next.pollIntervalMs,
        maxPolls: next.maxPolls,
        maxResubmits: next.maxResubmits,
      });
    },
  };
}

/** First poll after a submit, per type (docs/provider-protocol.md, "Timing and limits"). */
export const DEFAULT_FIRST_POLL_MS: Record<TaskType, number> = {
  image: 5000,
  recaptcha_v3: 12_000,
  recaptcha_v2: 15_000,
  geetest: 15_000,
  turnstile: 10_000,
};

export function firstPollDelay(type: TaskType, override: number | undefined): number {
  return override ?? DEFAULT_FIRST_POLL_MS[type];
}

/** When a solved answer stops being valid; image answers do not expire. */
export function tokenExpiry(type: TaskType, solvedAt: Date, ttlMs: number): Date | null {
  if (type === "image") return null;
  return new Date(solvedAt.getTime() + ttlMs);
}

/** Exponential backoff with full jitter: uniform in [base*2^n / 2, base*2^n], capped. */
export function backoff(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}
