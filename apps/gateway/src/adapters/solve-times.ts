import type { Db } from "@pipeline/shared/db";
import type { Logger } from "@pipeline/shared/log";

/** The measured p90 solve time of a task type (ms), or undefined while too few were measured. */
export interface SolveTimes {
  p90Ms(type: string): number | undefined;
}

export interface SolveTimesOptions {
  /** Completed tasks finished within this window count (SCHEDULE_SOLVE_WINDOW_MS). */
  windowMs: number;
  /** Re-read at most this often; a read happens on a `p90Ms` call after it, never on a timer. */
  refreshMs?: number;
  /** Fewer completed tasks of a type than this: no figure (the default lead is used). */
  minSamples?: number;
  /** The newest completed tasks read at most (a bounded index range, whatever the load). */
  maxRows?: number;
}

/**
 * The p90 of "queued to token" per task type from Postgres: `completed_at` minus the moment the task
 * went to its lane (`start_at` for a scheduled task, else `created_at`), over the newest
 * `maxRows` tasks completed in the window (the retention index on the finish time). It includes the
 * wait in the lane, which is what a scheduled start must allow for. Read in the background: a
 * submit never waits for it (the first ones after a start use the default).
 */
export function createSolveTimes(db: Db, log: Logger, o: SolveTimesOptions): SolveTimes {
  const refreshMs = o.refreshMs ?? 30_000;
  const minSamples = o.minSamples ?? 20;
  let figures = new Map<string, number>();
  let readAt = 0;
  let reading = false;
  const refresh = async () => {
    reading = true;
    try {
      const rows = await db.$client<{ type: string; n: number; p90: number }[]>`
        select type, count(*)::int as n,
          percentile_cont(0.9) within group (order by extract(epoch from completed_at - coalesce(start_at, created_at)) * 1000)::float8 as p90
        from (
          select type, completed_at, start_at, created_at from tasks
          where state = 'completed' and completed_at is not null
            and coalesce(completed_at, updated_at) > now() - ${`${o.windowMs} milliseconds`}::interval
          order by coalesce(completed_at, updated_at) desc
          limit ${o.maxRows ?? 5000}
        ) t
        group by type`;
      figures = new Map(rows.filter((r) => r.n >= minSamples).map((r) => [r.type, Math.max(0, Math.round(r.p90))]));
    } catch (err) {
      log.warn({ err: (err as Error).message }, "solve times not read; keeping the last figures");
    } finally {
      readAt = Date.now();
      reading = false;
    }
  };
  return {
    p90Ms(type) {
      if (!reading && Date.now() - readAt >= refreshMs) void refresh();
      return figures.get(type);
    },
  };
}
