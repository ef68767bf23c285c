import { htmlErrorPage } from "./protocol-reply.ts";
import type { CapacitySchedule, FaultConfig } from "./settings.ts";

/** True with probability `rate` (never for 0 or absent, always for 1). */
export function rolls(rate: number | undefined, random: () => number): boolean {
  return rate !== undefined && rate > 0 && random() < rate;
}

/** Waits `ms` milliseconds (no timer for 0). */
export function delay(ms: number | undefined): Promise<void> {
  if (!ms || ms <= 0) return Promise.resolve();
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * The transport-level faults that hit any protocol call before it is processed: an outage
 * (HTML 503 until `outageUntil`) or a random HTML 500. Returns the page to send, or null.
 * Nothing is processed when a page is returned, so the call has no side effect.
 */
export function transportFault(faults: FaultConfig, now: number, random: () => number): Response | null {
  if (faults.outageUntil !== undefined && now < faults.outageUntil) return htmlErrorPage(503);
  if (rolls(faults.http500Rate, random)) return htmlErrorPage(500);
  return null;
}

/**
 * The capacity the schedule gives at `now` (epoch ms): the step whose time it is, counted from
 * `startAt`; before it, the first step; past the last, the first again (`repeat`, the default) or
 * the last. Undefined without a schedule (no limit beyond the key's threads).
 */
export function capacityAt(c: CapacitySchedule | undefined, now: number): number | undefined {
  if (!c) return undefined;
  const total = c.steps.reduce((n, s) => n + s.forMs, 0);
  let t = Math.max(0, now - (c.startAt ?? 0));
  if (c.repeat === false && t >= total) return c.steps.at(-1)!.threads;
  t %= total;
  for (const s of c.steps) {
    if (t < s.forMs) return s.threads;
    t -= s.forMs;
  }
  return c.steps.at(-1)!.threads;
}
