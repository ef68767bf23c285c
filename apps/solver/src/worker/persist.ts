import type { Sleeper } from "./sleeps.ts";

/**
 * Runs a write until it succeeds or `forMs` passes (then rethrows), backing off from 100 ms up to
 * `maxMs` (2 s); an error `retryable` refuses is rethrown at once, and a hard stop (the signal)
 * ends the wait. The submit path's provider-id checkpoint, and the release of a row after a
 * handler error (worker.ts: through a database outage, so a redelivery finds the row free instead
 * of waiting out the lease; `tests/restarts.test.ts`).
 */
export async function persist<T>(
  write: () => Promise<T>,
  forMs: number,
  sleeper: Sleeper,
  signal: AbortSignal,
  o: { maxMs?: number; retryable?: (err: unknown) => boolean } = {},
): Promise<T> {
  const until = Date.now() + forMs;
  for (let wait = 100; ; wait = Math.min(o.maxMs ?? 2000, wait * 2)) {
    try {
      return await write();
    } catch (err) {
      if (o.retryable?.(err) === false || Date.now() + wait > until) throw err;
      await sleeper.sleep(wait, signal);
    }
  }
}
