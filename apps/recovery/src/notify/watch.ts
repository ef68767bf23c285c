// Trackers that turn periodic readings into events (pure; watch.test.ts): a breaker storm is an
// account whose breaker every live solver reports not closed for longer than `stormMs`; DLQ growth
// is the dead-letter stream's last sequence rising by `threshold` within `windowMs`.

/** Per account: since when its breaker has been seen not closed, and whether that storm was told. */
export interface StormTracker {
  /** The accounts whose storm starts now (not told before), with the storm's start. */
  observe(states: { keyRef: string; breaker: string }[], now: number): { keyRef: string; since: number }[];
}

export function stormTracker(stormMs: number): StormTracker {
  const open = new Map<string, { since: number; told: boolean }>();
  return {
    observe(states, now) {
      const byAccount = new Map<string, boolean>();
      // Open only when every solver that uses the account says so (one solver's own trouble is not a storm).
      for (const s of states) byAccount.set(s.keyRef, (byAccount.get(s.keyRef) ?? true) && s.breaker !== "closed");
      const out: { keyRef: string; since: number }[] = [];
      for (const [keyRef, isOpen] of byAccount) {
        const cur = open.get(keyRef);
        if (!isOpen) open.delete(keyRef);
        else if (!cur) open.set(keyRef, { since: now, told: false });
        else if (!cur.told && now - cur.since >= stormMs) {
          cur.told = true;
          out.push({ keyRef, since: cur.since });
        }
      }
      // An account no solver reports any more (all gone) is forgotten.
      for (const keyRef of open.keys()) if (!byAccount.has(keyRef)) open.delete(keyRef);
      return out;
    },
  };
}

/** Readings of the DLQ's last sequence; a growth of `threshold` within `windowMs` is told once, then counting starts over. */
export interface GrowthTracker {
  observe(lastSeq: number, now: number): { fromSeq: number; grew: number } | undefined;
}

export function growthTracker(threshold: number, windowMs: number): GrowthTracker {
  let readings: { seq: number; at: number }[] = [];
  return {
    observe(lastSeq, now) {
      readings = readings.filter((r) => now - r.at <= windowMs && r.seq <= lastSeq);
      readings.push({ seq: lastSeq, at: now });
      const base = readings[0]!;
      const grew = lastSeq - base.seq;
      if (grew < threshold) return undefined;
      readings = [{ seq: lastSeq, at: now }];
      return { fromSeq: base.seq + 1, grew };
    },
  };
}
