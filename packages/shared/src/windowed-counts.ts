/** One name's failures within its fixed window (from its first failure). */
export interface CountWindow {
  start: number;
  failures: number;
}

/**
 * Failure counts per name (a source address, an address and key) in fixed windows, with memory
 * bounded to `maxEntries`: past that, expired entries go first, then the oldest. What the
 * gateway's failed-authentication throttle and the console's sign-in throttle count with.
 */
export function windowedCounts(windowMs: number, maxEntries: number, now: () => number = Date.now) {
  const byName = new Map<string, CountWindow>();
  const live = (name: string): CountWindow | undefined => {
    const e = byName.get(name);
    if (e && now() - e.start >= windowMs) {
      byName.delete(name);
      return undefined;
    }
    return e;
  };
  const makeRoom = () => {
    if (byName.size < maxEntries) return;
    const t = now();
    for (const [k, e] of byName) if (t - e.start >= windowMs) byName.delete(k);
    // Still full: the oldest entries go (a Map iterates in insertion order).
    for (const k of byName.keys()) {
      if (byName.size < maxEntries) break;
      byName.delete(k);
    }
  };
  return {
    /** The name's window when it is still running, else undefined (an expired one is dropped). */
    live,
    /** Counts one failure of `name`, opening its window when none runs. */
    count(name: string): CountWindow {
      let e = live(name);
      if (!e) {
        makeRoom();
        e = { start: now(), failures: 0 };
        byName.set(name, e);
      }
      e.failures++;
      return e;
    },
    /** Seconds until the window `e` ends (at least 1). */
    secondsLeft: (e: CountWindow) => Math.max(1, Math.ceil((e.start + windowMs - now()) / 1000)),
    get size() {
      return byName.size;
    },
    clear: () => byName.clear(),
  };
}
