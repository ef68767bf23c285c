// When to try again: exponential backoff with full jitter, and the server's Retry-After.

export interface RetryPolicy {
  /** Tries in all (the first included). */
  attempts: number;
  /** The first backoff's ceiling; each next one doubles it. */
  baseMs: number;
  /** No wait is longer than this (a Retry-After above it is cut to it). */
  maxMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 6, baseMs: 200, maxMs: 10_000 };

/**
 * The wait before retry number `retry` (0 for the first retry): a uniformly random time in
 * [0, min(maxMs, baseMs * 2^retry)) ("full jitter"), so many clients failed at once do not come
 * back at once.
 */
export function backoffMs(retry: number, p: Pick<RetryPolicy, "baseMs" | "maxMs">, random = Math.random): number {
  const ceiling = Math.min(p.maxMs, p.baseMs * 2 ** Math.max(0, retry));
  return Math.floor(random() * ceiling);
}

/**
 * `Retry-After` in milliseconds from `now`: delay-seconds (`"3"`) or an HTTP date; undefined when
 * absent or unreadable. A date in the past is 0.
 */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (value === null || value === undefined) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  if (!/[a-z]/i.test(v)) return undefined;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

/**
 * The wait before a retry: the server's Retry-After when it gave one (never less: it said when),
 * else the jittered backoff; both capped at `maxMs`.
 */
export function retryDelayMs(
  retry: number,
  p: Pick<RetryPolicy, "baseMs" | "maxMs">,
  retryAfterMs: number | undefined,
  random = Math.random,
): number {
  if (retryAfterMs !== undefined) return Math.min(p.maxMs, retryAfterMs);
  return backoffMs(retry, p, random);
}
