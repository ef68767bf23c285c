import { type GroupOf, requeueMessage } from "@pipeline/shared/fair-share";
import { ensureStreams, publishScheduledTask } from "@pipeline/shared/nats";
import { progressBar } from "@pipeline/shared/progress";
import { streams } from "@pipeline/shared/subjects";
import { groupsReader } from "../adapters/fair-share-groups.ts";
import { type RepublishRow, republishTask, scanTasksStream } from "../adapters/tasks-stream.ts";
import type { RecoveryContext } from "../context.ts";

export interface RebuildReport {
  at: string;
  stream: string;
  /** True when TASKS did not exist and was created. */
  created: boolean;
  /** Non-terminal rows in Postgres. */
  open: number;
  /** Messages stored. */
  republished: number;
  /**
   * Of those, scheduled tasks whose start is still ahead, held again until it (a message
   * schedule, docs/scheduling.md) rather than queued at once.
   */
  held: number;
  /** Rows whose message was already in TASKS (nothing to do). */
  withMessage: number;
  /** Publishes deduplicated by JetStream (a rebuild of the same version ran before). */
  duplicates: number;
  /** Fresh `queued` rows left to the gateway's own publish during the first pass, then re-checked. */
  deferred: number;
  ms: number;
}

export interface RebuildOptions {
  /**
   * A `queued` row at version 0 younger than this may still be in the gateway's publish retry
   * (PUBLISH_DEADLINE_MS): publishing it now as well would put two messages for one task in
   * the queue. Such rows get a second pass once the grace has passed, if still without message.
   */
  gatewayGraceMs: number;
  /** Waits between passes (tests pass a fake). */
  sleep?: (ms: number) => Promise<void>;
}

interface OpenRow extends RepublishRow {
  young: boolean;
  ageMs: number;
  /** A queued scheduled task's start, epoch ms (docs/scheduling.md); null: none, or not queued. */
  startAtMs: number | null;
}

/** A start closer than this is queued at once (as the gateway does: domain/schedule.ts). */
const IMMEDIATE_WITHIN_MS = 250;

/**
 * A queued task whose start is still ahead goes back on hold until it, with the gateway's own
 * message id `<id>:schedule`. True when stored. That id may still be in JetStream's duplicate
 * window on a stream that was not lost (the held message purged by hand): false, and the caller
 * queues the task at once instead (it starts early; it is not left out).
 */
async function holdAgain(ctx: RecoveryContext, r: OpenRow, groupOf: GroupOf): Promise<boolean> {
  if (r.startAtMs === null || r.startAtMs - Date.now() <= IMMEDIATE_WITHIN_MS) return false;
  const msg = requeueMessage(r, groupOf);
  const ack = await publishScheduledTask(ctx.js, ctx.region, msg, new Date(r.startAtMs), ctx.publishDeadlineMs);
  return !ack.duplicate;
}

/**
 * Makes TASKS whole again from Postgres, the truth: creates the stream if missing (verified
 * read-back, as every service does), then publishes every non-terminal task (queued, retrying,
 * solving) that has no message in the stream, with message id `<id>:rebuild:<version>`; a queued
 * scheduled task whose start is still ahead is held again until it (holdAgain), one whose start
 * has passed is queued at once. The queue
 * can therefore be lost outright. Safe to repeat and safe on a healthy queue: a task that has a
 * message is skipped, and the solver's Postgres claim dedups any message left over.
 */
export async function rebuildQueue(ctx: RecoveryContext, o: RebuildOptions): Promise<RebuildReport> {
  const started = Date.now();
  const sleep = o.sleep ?? Bun.sleep;
  const name = streams.tasks(ctx.region);
  const before = await scanTasksStream(ctx.jsm, ctx.region);
  await ensureStreams(ctx.jsm, { region: ctx.region, replicas: ctx.streamReplicas ?? 1 });
  const report: RebuildReport = {
    at: new Date(started).toISOString(),
    stream: name,
    created: !before.exists,
    open: 0,
    republished: 0,
    held: 0,
    withMessage: 0,
    duplicates: 0,
    deferred: 0,
    ms: 0,
  };
  const openRows = async (ids?: string[]) =>
    ctx.database.sql<OpenRow[]>`
      select id, type, priority, owner, version,
        (case when state = 'queued' then extract(epoch from start_at) * 1000 end)::float8 as "startAtMs",
        (state = 'queued' and version = 0 and created_at > now() - ${`${o.gatewayGraceMs} milliseconds`}::interval) as young,
        (extract(epoch from now() - created_at) * 1000)::float8 as "ageMs"
      from tasks
      where region = ${ctx.region} and state in ('queued', 'retrying', 'solving') ${ids ? ctx.database.sql`and id = any(${ids}::uuid[])` : ctx.database.sql``}
      order by case priority when 'high' then 0 when 'normal' then 1 else 2 end, created_at`;
  // Rows are read after the stream exists: a row inserted later is published by its gateway.
  const rows = await openRows();
  report.open = rows.length;
  ctx.log.debug(
    { created: report.created, open: rows.length, young: rows.filter((r) => r.young).length },
    "rebuild: stream ensured, rows read",
  );
  // Every message on its owner's fair-share group's subjects, as the gateway put it.
  const groupOf = await groupsReader(ctx.jsm, ctx.region, ctx.log)();
  const publish = async (list: OpenRow[], label: string) => {
    const scan = await scanTasksStream(ctx.jsm, ctx.region);
    ctx.log.debug({ rows: list.length, messages: scan.messages }, "rebuild: pass");
    // On a terminal: a bar with an estimate over the rows of this pass (nothing when piped).
    const bar = progressBar(label, list.length, { unit: "tasks" });
    try {
      for (const r of list) {
        bar.increment();
        if (scan.ids.has(r.id)) {
          report.withMessage++;
          continue;
        }
        if (await holdAgain(ctx, r, groupOf)) {
          report.republished++;
          report.held++;
        } else if (await republishTask(ctx.js, ctx.region, r, "rebuild", ctx.publishDeadlineMs, groupOf))
          report.republished++;
        else report.duplicates++;
      }
    } finally {
      bar.done();
    }
  };
  await publish(
    rows.filter((r) => !r.young),
    "rebuild-queue",
  );
  const young = rows.filter((r) => r.young);
  report.deferred = young.length;
  if (young.length > 0) {
    const oldest = Math.max(...young.map((r) => r.ageMs));
    await sleep(Math.max(0, o.gatewayGraceMs - oldest));
    await publish(await openRows(young.map((r) => r.id)), "rebuild-queue (fresh rows)");
  }
  report.ms = Date.now() - started;
  ctx.log.warn(
    { stream: name, created: report.created, republished: report.republished, open: report.open },
    "TASKS rebuilt from Postgres",
  );
  return report;
}
