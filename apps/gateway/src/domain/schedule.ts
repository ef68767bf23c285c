// When a task with `notBefore` / `needBy` starts (docs/scheduling.md). Pure: the clock, the
// request's instants and the measured solve time come in; field errors or a plan come out.

export interface ScheduleLimits {
  /** How far ahead `notBefore` / `needBy` may be (SCHEDULE_MAX_AHEAD_MS). */
  maxAheadMs: number;
  /** Added to the measured p90 solve time: the token is meant to be ready this long before needBy (SCHEDULE_MARGIN_MS). */
  marginMs: number;
  /** The lead used while a type has too few measured solves (SCHEDULE_DEFAULT_SOLVE_MS). */
  defaultSolveMs: number;
  /** A start this close to now (or earlier) is published at once, without a schedule. */
  immediateWithinMs?: number;
}

export interface SchedulePlan {
  notBefore: Date | null;
  needBy: Date | null;
  /** When the task goes to its lane; null: now (no schedule). */
  startAt: Date | null;
  /** The lead used for needBy (p90 solve time + margin), for the logs and tests. */
  leadMs: number;
}

export type ScheduleResult =
  | { ok: true; plan: SchedulePlan }
  | { ok: false; errors: { field: string; message: string }[] };

/**
 * Checks the request's instants against the clock: each in the future and at most `maxAheadMs`
 * ahead, `needBy` after `notBefore`. Then the start: `needBy - (p90 + margin)` (the type's measured
 * p90 solve time, `defaultSolveMs` while none is measured), never before `notBefore`, never before
 * now; a start within `immediateWithinMs` of now is no schedule at all.
 */
export function planSchedule(
  req: { notBefore?: string | undefined; needBy?: string | undefined },
  nowMs: number,
  p90SolveMs: number | undefined,
  l: ScheduleLimits,
): ScheduleResult {
  const errors: { field: string; message: string }[] = [];
  const instant = (field: "notBefore" | "needBy", v: string | undefined): number | undefined => {
    if (v === undefined) return undefined;
    const t = Date.parse(v);
    if (!Number.isFinite(t)) errors.push({ field, message: "not a valid instant" });
    else if (t <= nowMs) errors.push({ field, message: "must be in the future" });
    else if (t - nowMs > l.maxAheadMs)
      errors.push({ field, message: `must be at most ${Math.round(l.maxAheadMs / 60_000)} minutes ahead` });
    else return t;
    return undefined;
  };
  const notBefore = instant("notBefore", req.notBefore);
  const needBy = instant("needBy", req.needBy);
  if (notBefore !== undefined && needBy !== undefined && needBy <= notBefore)
    errors.push({ field: "needBy", message: "must be after notBefore" });
  if (errors.length) return { ok: false, errors };
  const leadMs = (p90SolveMs ?? l.defaultSolveMs) + l.marginMs;
  const start = Math.max(nowMs, notBefore ?? nowMs, needBy === undefined ? nowMs : needBy - leadMs);
  const immediate = start - nowMs <= (l.immediateWithinMs ?? 250);
  return {
    ok: true,
    plan: {
      notBefore: notBefore === undefined ? null : new Date(notBefore),
      needBy: needBy === undefined ? null : new Date(needBy),
      startAt: immediate ? null : new Date(start),
      leadMs,
    },
  };
}

/** The task's deadline: `needBy` when given (past it unsolved the task fails), else the usual span from its start. */
export function scheduledDeadline(plan: SchedulePlan, nowMs: number, taskDeadlineMs: number): Date {
  if (plan.needBy) return plan.needBy;
  return new Date((plan.startAt?.getTime() ?? nowMs) + taskDeadlineMs);
}
