/** A counting semaphore: `acquire` resolves when a permit is free; `release` hands it on. */
export interface Permits {
  acquire(): Promise<void>;
  release(): void;
}

export function createPermits(max: number): Permits {
  let free = max;
  const waiting: Array<() => void> = [];
  return {
    acquire: () => (free > 0 ? (free--, Promise.resolve()) : new Promise<void>((r) => waiting.push(r))),
    release: () => {
      const next = waiting.shift();
      if (next) next();
      else free++;
    },
  };
}
