// Client load: a closed loop (N clients, each sending its next request when the last answered)
// and an open loop (requests started at a fixed rate, whatever the answers do).

export interface ClosedLoopResult {
  /** performance.now() when the first request started and when the last answered. */
  startedAt: number;
  endedAt: number;
  errors: number;
  firstError?: string;
}

/**
 * Runs `op(i)` for i = from..from+count-1 through `clients` concurrent loops. A failed op is
 * counted (and the first message kept), not retried.
 */
export async function closedLoop(
  count: number,
  clients: number,
  op: (i: number) => Promise<unknown>,
  from = 0,
): Promise<ClosedLoopResult> {
  let next = from;
  const end = from + count;
  let errors = 0;
  let firstError: string | undefined;
  const startedAt = performance.now();
  const client = async () => {
    while (next < end) {
      const i = next++;
      try {
        await op(i);
      } catch (err) {
        errors++;
        firstError ??= (err as Error).message;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(clients, count) }, client));
  return { startedAt, endedAt: performance.now(), errors, ...(firstError ? { firstError } : {}) };
}

/**
 * Starts `op(i)` at `perSecond` (i = 0..count-1, at t0 + i/perSecond) without waiting for earlier
 * ones, and resolves with every result once all have settled.
 */
export async function openLoop<T>(
  count: number,
  perSecond: number,
  op: (i: number) => Promise<T>,
): Promise<PromiseSettledResult<T>[]> {
  const t0 = performance.now();
  const all: Promise<T>[] = [];
  for (let i = 0; i < count; i++) {
    const due = t0 + (i * 1000) / perSecond;
    const wait = due - performance.now();
    if (wait > 1) await Bun.sleep(wait);
    all.push(op(i));
  }
  return Promise.allSettled(all);
}

/** The q-quantile (0..1) of the values, nearest rank. */
export function quantile(values: number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}
