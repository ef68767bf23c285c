// Failed console sign-ins per source address, counted with the same windowed counter as the
// gateway's failed-authentication throttle (@pipeline/shared/windowed-counts). A source that failed `maxFailures` times within `windowMs` (a fixed window
// from its first failure) is refused, whatever it sends, until that window ends: guessing tokens
// costs a window per `maxFailures` guesses, and a throttled guess is never checked (no oracle).

import { windowedCounts } from "@pipeline/shared/windowed-counts";

export interface SignInThrottle {
  /** Seconds until `source` may try again when it is throttled now, else undefined. */
  blocked(source: string): number | undefined;
  /** Counts a failed sign-in of `source`. */
  failed(source: string): void;
  /** Sources tracked (at most `maxSources`). */
  size(): number;
}

/**
 * A fixed-window failure counter per source. Memory is bounded: past `maxSources` sources, the
 * expired entries go first, then the oldest.
 */
export function signInThrottle(o: {
  maxFailures: number;
  windowMs: number;
  maxSources?: number;
  now?: () => number;
}): SignInThrottle {
  const counts = windowedCounts(o.windowMs, o.maxSources ?? 10_000, o.now);
  return {
    blocked(source) {
      const e = counts.live(source);
      return e && e.failures >= o.maxFailures ? counts.secondsLeft(e) : undefined;
    },
    failed(source) {
      counts.count(source);
    },
    size: () => counts.size,
  };
}
