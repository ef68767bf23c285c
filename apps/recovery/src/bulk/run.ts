// The bulk actions themselves, shared by the console (console/bulk.ts) and the CLI (`recovery
// redrive-all`, `recovery cancel-all`): the preview (count, a sample, the limit) and the run.
// A run takes the oldest matching tasks first, at most `max` (CONSOLE_BULK_MAX), in batches of
// BATCH with CONCURRENCY at a time, and each task goes through the single-task path with its own
// guarded UPDATE (redriveTask; the gateway's cancelTaskRow): a task a concurrent action already
// took is refused, never published twice. One audit row per operation (`bulk.redrive` /
// `bulk.cancel`), written whatever the outcome.
import type { JetStreamClient } from "@nats-io/jetstream";
import type { Db } from "@pipeline/shared/db";
import type { Logger } from "@pipeline/shared/log";
import { publishWithRetry, unscheduleTask } from "@pipeline/shared/nats";
import type { TaskMessage } from "@pipeline/shared/schemas";
import { subjectOfEvent } from "@pipeline/shared/subjects";
import { cancelledEvent, cancelTaskRow } from "@pipeline/shared/tasks";
import type postgres from "postgres";
import { matchingKeys } from "../explorer/task-query.ts";
import { recordAudit } from "../fleet/audit.ts";
import { type BulkAction, type BulkFilter, queryOf, statesOf } from "./filter.ts";
import { type BulkOutcome, outcomeLine, previewLine } from "./summary.ts";

export const BATCH = 100;
export const CONCURRENCY = 8;
export const SAMPLE = 10;

export interface BulkDeps {
  sql: postgres.Sql;
  db: Db;
  js: JetStreamClient;
  region: string;
  publishDeadlineMs: number;
  /** CONSOLE_BULK_MAX: the most tasks one operation acts on. */
  max: number;
  /**
   * The single-task redrive (console/redrive.ts redriveTask, unaudited: the operation is audited
   * once): null when done, else its refusal's code.
   */
  redriveOne: (id: string, actor: string) => Promise<string | null>;
  log: Logger;
}

/** Every task the filter matches, as one `select id, created_at` (a union over the action's states). */
function keysOf(sql: postgres.Sql, action: BulkAction, filter: BulkFilter) {
  const now = Date.now();
  return statesOf(action, filter)
    .map((s) => matchingKeys(sql, queryOf(filter, s), now))
    .reduce((a, b) => sql`(${a}) union all (${b})`);
}

export interface PreviewResult {
  action: BulkAction;
  filter: BulkFilter;
  count: number;
  limit: number;
  /** The oldest matching ids (the first the run takes). */
  sample: string[];
  line: string;
}

export async function previewBulk(d: BulkDeps, action: BulkAction, filter: BulkFilter): Promise<PreviewResult> {
  const keys = keysOf(d.sql, action, filter);
  const [counted, sample] = await Promise.all([
    d.sql<{ n: number }[]>`select count(*)::int as n from (${keys}) k`,
    d.sql<{ id: string }[]>`select id from (${keys}) k order by created_at, id limit ${SAMPLE}`,
  ]);
  const count = counted[0]!.n;
  return {
    action,
    filter,
    count,
    limit: d.max,
    sample: sample.map((r) => r.id),
    line: previewLine({ action, count, limit: d.max }),
  };
}

export interface RunResult extends BulkOutcome {
  filter: BulkFilter;
  line: string;
  auditId: number;
}

/** One task's action: null when done, else the refusal's code. */
async function actOn(d: BulkDeps, action: BulkAction, filter: BulkFilter, id: string, actor: string) {
  if (action === "redrive") return d.redriveOne(id, actor);
  // The gateway's cancel (apps/gateway/src/tasks/cancel.ts): the row, then the event (a failed publish is logged).
  const row = await cancelTaskRow(d.db, id, filter.client!);
  if (!row) return "not_cancellable";
  // A scheduled task not yet started: its held message goes too (docs/scheduling.md).
  if (row.startAt && row.startAt.getTime() > Date.now())
    await unscheduleTask(d.js, d.region, {
      id: row.id,
      type: row.type as TaskMessage["type"],
      priority: row.priority as TaskMessage["priority"],
    }).catch((err) => d.log.warn({ taskId: id, err: (err as Error).message }, "bulk cancel: held message not removed"));
  const ev = cancelledEvent(row, d.region);
  await publishWithRetry(
    d.js,
    subjectOfEvent(d.region, ev),
    JSON.stringify(ev),
    `${ev.taskId}:${ev.version}:${ev.kind}`,
    d.publishDeadlineMs,
  ).catch((err) =>
    d.log.warn({ taskId: id, err: (err as Error).message }, "bulk cancel: cancelled event not published"),
  );
  return null;
}

/** Runs `ids` in batches, CONCURRENCY at a time; counts what was done and refused. */
async function walk(ids: string[], act: (id: string) => Promise<string | null>, tally: BulkOutcome, log: Logger) {
  for (let at = 0; at < ids.length; at += BATCH) {
    const batch = ids.slice(at, at + BATCH);
    let next = 0;
    const worker = async () => {
      while (next < batch.length) {
        const id = batch[next++]!;
        const code = await act(id).catch((err: Error) => {
          log.warn({ taskId: id, err: err.message }, "bulk action: a task failed");
          return "error";
        });
        if (code === null) tally.done++;
        else tally.refused[code] = (tally.refused[code] ?? 0) + 1;
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, batch.length) }, worker));
  }
}

/**
 * Acts on the oldest `max` tasks the filter matches now; `previewed`: the count the operator saw
 * (the outcome says when it changed). Audited as `bulk.<action>` by `actor`, `via` console or cli.
 */
export async function runBulk(
  d: BulkDeps,
  action: BulkAction,
  filter: BulkFilter,
  o: { actor: string; via: "console" | "cli"; previewed?: number },
): Promise<RunResult> {
  const keys = keysOf(d.sql, action, filter);
  const tally: BulkOutcome = {
    action,
    count: 0,
    limit: d.max,
    previewed: o.previewed,
    attempted: 0,
    done: 0,
    refused: {},
  };
  let outcome = "done";
  let auditId = 0;
  try {
    const [counted, rows] = await Promise.all([
      d.sql<{ n: number }[]>`select count(*)::int as n from (${keys}) k`,
      d.sql<{ id: string }[]>`select id from (${keys}) k order by created_at, id limit ${d.max}`,
    ]);
    tally.count = Math.max(counted[0]!.n, rows.length);
    tally.attempted = rows.length;
    await walk(
      rows.map((r) => r.id),
      (id) => actOn(d, action, filter, id, o.actor),
      tally,
      d.log,
    );
    if (tally.done < tally.attempted) outcome = "partial";
  } catch (err) {
    outcome = `failed: ${(err as Error).message}`;
    throw err;
  } finally {
    auditId = (
      await recordAudit(d.db, {
        actor: o.actor,
        action: `bulk.${action}`,
        detail: { filter, ...tally, outcome, line: outcomeLine(tally), via: o.via },
      })
    ).id;
  }
  return { ...tally, filter, line: outcomeLine(tally), auditId };
}
