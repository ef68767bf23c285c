/**
 * Throttles failed authentication (issue 14.8): a source (a client address) that presented
 * `maxFailures` unknown API keys within `windowMs` is refused, whatever key it sends, until the
 * window that counted them ends. Guessing keys costs the guesser a window per `maxFailures`
 * guesses, and a refused guess is not even checked (no oracle while throttled).
 *
 * Memory is bounded: at most `maxSources` sources are tracked; past that, expired entries are
 * dropped, then the oldest ones.
 */
export interface AuthThrottle {
  /** Seconds to wait when `source` is throttled now, else undefined. */
  blocked(source: string): number | undefined;
  /** Counts a failed authentication of `source`; returns the seconds to wait when this failure throttles it. */
  failed(source: string): number | undefined;
  size(): number;
  /**
   * Whether any source may be throttled now: false when no failure was counted within the last
   * window (the entries, all expired, are dropped then). Callers skip looking the source up.
   */
  active(): boolean;
}

export function createAuthThrottle(o: { maxFailures: number; windowMs: number; maxSources?: number; now?: () => number }): AuthThrottle {
  const now = o.now ?? Date.now;
  const maxSources = o.maxSources ?? 100_000;
  const bySource = new Map<string, { start: number; failures: number }>();
  let lastFailure = -Infinity;
  const live = (source: string) => {
    const e = bySource.get(source);
    if (e && now() - e.start >= o.windowMs) {
      bySource.delete(source);
      return undefined;
    }
    return e;
  };
  const wait = (e: { start: number }) => Math.max(1, Math.ceil((e.start + o.windowMs - now()) / 1000));
  const makeRoom = () => {
    if (bySource.size < maxSources) return;
    const t = now();
    for (const [k, e] of bySource) if (t - e.start >= o.windowMs) bySource.delete(k);
    // Still full: the oldest entries go (a Map iterates in insertion order).
    for (const k of bySource.keys()) {
      if (bySource.size < maxSources) break;
      bySource.delete(k);
    }
  };
  return {
    blocked(source) {
      const e = live(source);
      return e && e.failures >= o.maxFailures ? wait(e) : undefined;
    },
    failed(source) {
      lastFailure = now();
      let e = live(source);
      if (!e) {
        makeRoom();
        e = { start: now(), failures: 0 };
        bySource.set(source, e);
      }
      e.failures++;
      return e.failures >= o.maxFailures ? wait(e) : undefined;
    },
    size: () => bySource.size,
    active() {
      if (bySource.size === 0) return false;
      if (now() - lastFailure < o.windowMs) return true;
      bySource.clear();
      return false;
    },
  };
}
