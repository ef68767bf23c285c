// Failed console sign-ins per source address (issue 34): the console's own small counter, not the
// gateway's (apps/gateway/src/domain/auth-throttle.ts counts per address and key prefix; no app
// imports another). A source that failed `maxFailures` times within `windowMs` (a fixed window
// from its first failure) is refused, whatever it sends, until that window ends: guessing tokens
// costs a window per `maxFailures` guesses, and a throttled guess is never checked (no oracle).

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
export function signInThrottle(o: { maxFailures: number; windowMs: number; maxSources?: number; now?: () => number }): SignInThrottle {
  const now = o.now ?? Date.now;
  const maxSources = o.maxSources ?? 10_000;
  const bySource = new Map<string, { start: number; failures: number }>();
  const live = (source: string) => {
    const e = bySource.get(source);
    if (e && now() - e.start >= o.windowMs) {
      bySource.delete(source);
      return undefined;
    }
    return e;
  };
  const makeRoom = () => {
    if (bySource.size < maxSources) return;
    for (const [k, e] of bySource) if (now() - e.start >= o.windowMs) bySource.delete(k);
    for (const k of bySource.keys()) {
      if (bySource.size < maxSources) break;
      bySource.delete(k);
    }
  };
  return {
    blocked(source) {
      const e = live(source);
      if (!e || e.failures < o.maxFailures) return undefined;
      return Math.max(1, Math.ceil((e.start + o.windowMs - now()) / 1000));
    },
    failed(source) {
      let e = live(source);
      if (!e) {
        makeRoom();
        e = { start: now(), failures: 0 };
        bySource.set(source, e);
      }
      e.failures++;
    },
    size: () => bySource.size,
  };
}
