import { windowedCounts } from "@pipeline/shared/windowed-counts";

/**
 * Throttles failed authentication. Failures are counted twice within a window:
 *
 * - per (source address, key fingerprint): a key that failed `maxFailures` times from an address
 *   is refused there, unchecked, until its window ends. A client looping with a revoked key is
 *   stopped, and the clients sharing its address (a NAT, an office) keep working with theirs.
 * - per source address, whatever the keys: past `maxPerSource` failures the whole address is
 *   refused (a key guesser, who presents a new key each time). A refused guess is not even
 *   checked (no oracle while throttled), so guessing costs a window per `maxPerSource` keys.
 *
 * The fingerprint is a short digest of the key presented (never the key, never logged): two
 * different keys share one only by chance.
 *
 * Memory is bounded: at most `maxSources` entries are tracked in each table; past that, expired
 * entries are dropped, then the oldest ones.
 */
export interface AuthThrottle {
  /** Seconds to wait when `source` (or `key` from it) is throttled now, else undefined. */
  blocked(source: string, key: string): number | undefined;
  /** Counts a failed authentication of `key` from `source`; returns the seconds to wait when this failure throttles it. */
  failed(source: string, key: string): number | undefined;
  /** Entries held (both tables). */
  size(): number;
  /**
   * Whether anything may be throttled now: false when no failure was counted within the last
   * window (the entries, all expired, are dropped then). Callers skip looking the source up.
   */
  active(): boolean;
}

/** A short digest of a presented key: what the throttle counts a key's failures under. */
export function keyFingerprint(key: string): string {
  return Bun.hash.xxHash64(key).toString(36);
}

export function createAuthThrottle(o: {
  maxFailures: number;
  maxPerSource?: number;
  windowMs: number;
  maxSources?: number;
  now?: () => number;
}): AuthThrottle {
  const now = o.now ?? Date.now;
  const maxSources = o.maxSources ?? 100_000;
  const maxPerSource = o.maxPerSource ?? o.maxFailures * 10;
  const perKey = windowedCounts(o.windowMs, maxSources, now);
  const perSource = windowedCounts(o.windowMs, maxSources, now);
  let lastFailure = -Infinity;
  const wait = perSource.secondsLeft;
  const pair = (source: string, key: string) => `${source} ${keyFingerprint(key)}`;
  return {
    blocked(source, key) {
      const s = perSource.live(source);
      if (s && s.failures >= maxPerSource) return wait(s);
      const k = perKey.live(pair(source, key));
      return k && k.failures >= o.maxFailures ? wait(k) : undefined;
    },
    failed(source, key) {
      lastFailure = now();
      const s = perSource.count(source);
      const k = perKey.count(pair(source, key));
      if (s.failures >= maxPerSource) return wait(s);
      return k.failures >= o.maxFailures ? wait(k) : undefined;
    },
    size: () => perKey.size + perSource.size,
    active() {
      if (perKey.size === 0 && perSource.size === 0) return false;
      if (now() - lastFailure < o.windowMs) return true;
      perKey.clear();
      perSource.clear();
      return false;
    },
  };
}
