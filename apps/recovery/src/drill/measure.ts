/**
 * The drill's arithmetic, pure. RTO is "from the fault to tasks completing again at the normal
 * rate": the completion rate is cut into windows from the fault on; the service has recovered
 * at the end of the last window whose rate fell under `threshold` x the baseline rate.
 */
export function ratePerSec(times: number[], from: number, to: number): number {
  if (to <= from) return 0;
  return times.filter((t) => t >= from && t < to).length / ((to - from) / 1000);
}

export interface RecoveryOptions {
  faultAt: number;
  /** Windows are looked at up to here (the end of the load). */
  endAt: number;
  /** Completions per second before the fault. */
  baselinePerSec: number;
  windowMs?: number;
  /** Share of the baseline rate a window needs to count as normal. */
  threshold?: number;
}

/** Milliseconds from the fault until the rate was back for good; null when the last window is still low. */
export function recoveryMs(times: number[], o: RecoveryOptions): number | null {
  const w = o.windowMs ?? 1000;
  const need = (o.threshold ?? 0.5) * o.baselinePerSec * (w / 1000);
  const sorted = [...times].sort((a, b) => a - b);
  let lastLowEnd = o.faultAt;
  let lastWasLow = false;
  for (let start = o.faultAt; start + w <= o.endAt; start += w) {
    const n = countIn(sorted, start, start + w);
    lastWasLow = n < need;
    if (lastWasLow) lastLowEnd = start + w;
  }
  if (lastWasLow) return null;
  return lastLowEnd - o.faultAt;
}

function countIn(sorted: number[], from: number, to: number): number {
  let n = 0;
  for (const t of sorted) {
    if (t >= to) break;
    if (t >= from) n++;
  }
  return n;
}

export interface RpoFigures {
  /** Tasks the gateway acknowledged (202) during the drill. */
  acknowledged: number;
  completed: number;
  /** Acknowledged, then unknown to the system (404) at the end. */
  lost: number;
  /** Acknowledged, then failed, expired or cancelled (not counting tokensLost). */
  failed: number;
  /**
   * Completed and paid, but the token is not held any more (status expired, TOKEN_UNAVAILABLE): a
   * task completed after the snapshot and restored from EVENTS, which carry no token (retention).
   * The task is not lost; its answer is. Counted apart from RPO.
   */
  tokensLost: number;
  /** Acknowledged, not finished when the drill gave up waiting. */
  unfinished: number;
  /** Submissions the gateway refused (not acknowledged: the client knows to retry). */
  refused: number;
}

/** RPO: acknowledged tasks lost or failed because of the fault (unfinished ones count too). */
export const rpoOf = (f: RpoFigures): number => f.lost + f.failed + f.unfinished;
