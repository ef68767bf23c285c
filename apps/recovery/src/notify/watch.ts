// DLQ growth from periodic readings (pure; watch.test.ts): the dead-letter stream's last sequence
// rising by `threshold` within `windowMs`.

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
