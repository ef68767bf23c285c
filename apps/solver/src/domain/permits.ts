/** A counting semaphore: `acquire` resolves when a permit is free; `release` hands it on. */
export interface Permits {
  /** `group`: the task's fair-share group; with a `rank`, the lowest-ranked waiter is served first. */
  acquire(group?: string): Promise<void>;
  release(): void;
}

/**
 * `rank` (domain/fair-share.ts): a freed permit goes to the waiter of the lowest rank (the first
 * of equals); without it, first come, first served.
 */
export function createPermits(max: number, rank?: (group: string | undefined) => number): Permits {
  let free = max;
  const waiting: Array<{ resolve: () => void; group: string | undefined }> = [];
  const next = () => {
    if (!rank || waiting.length < 2) return 0;
    let best = 0;
    let bestRank = rank(waiting[0]!.group);
    for (let i = 1; i < waiting.length; i++) {
      const r = rank(waiting[i]!.group);
      if (r < bestRank) (best = i), (bestRank = r);
    }
    return best;
  };
  return {
    acquire: (group) =>
      free > 0 ? (free--, Promise.resolve()) : new Promise<void>((resolve) => waiting.push({ resolve, group })),
    release: () => {
      if (waiting.length > 0) waiting.splice(next(), 1)[0]!.resolve();
      else free++;
    },
  };
}
