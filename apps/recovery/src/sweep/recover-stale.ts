import { streams } from "@pipeline/shared/subjects";
import { groupsReader } from "../adapters/fair-share-groups.ts";
import { republishTask, scanTasksStream } from "../adapters/tasks-stream.ts";
import type { RecoveryContext } from "../context.ts";

export interface StaleRow {
  id: string;
  type: string;
  priority: string;
  state: string;
  version: number;
  why: "lease expired" | "not updated";
}

export interface SweepReport {
  at: string;
  /** Rows that looked stale in Postgres. */
  candidates: number;
  /** Of those, rows whose message is still in TASKS (left to the solvers). */
  withMessage: number;
  /** Rows that changed between the query and the publish (someone is working on them). */
  changed: number;
  /** Messages stored by this sweep. */
  republished: number;
  /** Publishes JetStream dropped as duplicates (an earlier sweep of the same version). */
  duplicates: number;
  scan: { messages: number; ms: number };
  ms: number;
  tasks: Array<StaleRow & { action: "republished" | "duplicate" | "has message" | "changed" }>;
}

/** Raised when TASKS is missing: that is queue loss, and `rebuild-queue` is the command for it. */
export class QueueMissingError extends Error {
  override name = "QueueMissingError";
}

export interface SweepOptions {
  /** queued/retrying rows not updated for this long are candidates. */
  staleAfterMs: number;
  /** At most this many rows per sweep (oldest first). */
  limit?: number;
}

/**
 * Re-publishes the tasks Postgres says are unfinished and nobody will deliver: `solving` rows whose
 * lease expired and `queued`/`retrying` rows not updated for `staleAfterMs`, when TASKS holds no
 * message for them and their version did not change meanwhile. Idempotent: a second run finds
 * the message the first one stored (or the same `<id>:sweep:<version>` id is deduplicated).
 * Never creates a task, never changes a row: the solver's claim stays the only writer.
 */
export async function recoverStale(ctx: RecoveryContext, o: SweepOptions): Promise<SweepReport> {
  const started = Date.now();
  const { sql: pg } = ctx.database;
  const staleAfter = `${o.staleAfterMs} milliseconds`;
  const candidates = await pg<Array<StaleRow & { owner: string }>>`
    select id, type, priority, state, version, owner,
      case when state = 'solving' then 'lease expired' else 'not updated' end as why
    from tasks
    where region = ${ctx.region}
      and ((state = 'solving' and (lease_until is null or lease_until < now()))
        or (state in ('queued', 'retrying') and updated_at < now() - ${staleAfter}::interval
          -- A scheduled task is held on TASKS until its start (docs/scheduling.md): not stale before it.
          and (start_at is null or start_at < now() - ${staleAfter}::interval)))
    order by updated_at
    limit ${o.limit ?? 10_000}`;
  const report: SweepReport = {
    at: new Date(started).toISOString(),
    candidates: candidates.length,
    withMessage: 0,
    changed: 0,
    republished: 0,
    duplicates: 0,
    scan: { messages: 0, ms: 0 },
    ms: 0,
    tasks: [],
  };
  if (candidates.length > 0) {
    // The scan comes after the query: a message acked in between belongs to a row that has
    // changed version, which the re-check below drops.
    const scan = await scanTasksStream(ctx.jsm, ctx.region);
    if (!scan.exists)
      throw new QueueMissingError(`${streams.tasks(ctx.region)} does not exist: queue loss, run rebuild-queue`);
    report.scan = { messages: scan.messages, ms: scan.ms };
    // The report lists the rows as StaleRow (no owner).
    const shown = ({ owner: _, ...r }: StaleRow & { owner: string }): StaleRow => r;
    const orphans = candidates.filter((r) => {
      if (!scan.ids.has(r.id)) return true;
      report.withMessage++;
      report.tasks.push({ ...shown(r), action: "has message" });
      return false;
    });
    const groups = groupsReader(ctx.jsm, ctx.region, ctx.log, Number.POSITIVE_INFINITY);
    const still = orphans.length
      ? new Set(
          (
            await pg<{ id: string }[]>`
              select t.id from tasks t
              join jsonb_to_recordset(${JSON.stringify(orphans.map((r) => ({ id: r.id, version: r.version })))}::text::jsonb) as c(id uuid, version int)
                on t.id = c.id and t.version = c.version
              where t.state in ('queued', 'solving', 'retrying')`
          ).map((r) => r.id),
        )
      : new Set<string>();
    for (const r of orphans) {
      if (!still.has(r.id)) {
        report.changed++;
        report.tasks.push({ ...shown(r), action: "changed" });
        continue;
      }
      // On the owner's fair-share group's subjects, as the gateway put it.
      const stored = await republishTask(ctx.js, ctx.region, r, "sweep", ctx.publishDeadlineMs, await groups());
      if (stored) report.republished++;
      else report.duplicates++;
      report.tasks.push({ ...shown(r), action: stored ? "republished" : "duplicate" });
    }
  }
  report.ms = Date.now() - started;
  if (report.republished > 0)
    ctx.log.warn({ republished: report.republished, candidates: report.candidates }, "stale sweep re-published tasks");
  return report;
}
