// The console's redrive: what the gateway's `POST /v1/tasks/:id/retry` does (apps/gateway
// src/tasks/redrive.ts and adapters/pg.ts; the core shared, @pipeline/shared/tasks
// redriveFailedTask), for any owner's task, by an operator, and audited.
// failed -> queued with a fresh deadline and attempt count, in one guarded UPDATE; then a message
// with a fresh id (`<id>:redrive:<n>`: the first may still be in the duplicate window); when the
// publish fails the row goes back to failed. The solver's guarded claim stays the only writer
// after that.
import type { JetStreamClient } from "@nats-io/jetstream";
import type { Db } from "@pipeline/shared/db";
import { publishTaskMessage, publishWithRetry } from "@pipeline/shared/nats";
import { eventSubject } from "@pipeline/shared/subjects";
import { type RequeuedRow, redriveFailedTask } from "@pipeline/shared/tasks";
import type postgres from "postgres";
import type { GroupsReader } from "../adapters/fair-share-groups.ts";
import { recordAudit } from "../fleet/audit.ts";

export type RedriveResult =
  | { ok: true; id: string; redrives: number; deadlineAt: string | null }
  | { ok: false; status: 404 | 409 | 503; code: RedriveRefusal; reason: string };

/** Why a redrive changed nothing (the bulk redrive groups its refusals by it). */
export type RedriveRefusal = "not_found" | "purged" | "other_region" | "not_failed" | "queue_unavailable";

/** `audit: false`: the caller audits (a bulk redrive records one row for the whole operation). */
export interface RedriveOptions {
  audit?: boolean;
}

export interface RedriveDeps {
  sql: postgres.Sql;
  db: Db;
  js: JetStreamClient;
  region: string;
  deadlineMs: number;
  publishDeadlineMs: number;
  /** The fair-share groups in use (adapters/fair-share-groups.ts): the message goes on the owner's group's subjects. */
  groups?: GroupsReader;
}

type Refused = Extract<RedriveResult, { ok: false }>;

/** What the requeue returns: the shared core's row, its deadline as Postgres names the column. */
type RequeuedSqlRow = Omit<RequeuedRow, "deadlineAt"> & { deadline_at: Date | null };

/** The task's state, or why it cannot be redriven from here (gone, params erased, another region). */
async function precheck(d: RedriveDeps, id: string): Promise<{ state: string } | Refused> {
  const [cur] = await d.sql<
    { state: string; region: string; purged: boolean }[]
  >`select state, region, params = '{}'::jsonb as purged from tasks where id = ${id}`;
  if (!cur) return { ok: false, status: 404, code: "not_found", reason: "no such task" };
  // Retention erased its params (TASK_RETENTION_DAYS, docs/security.md): there is nothing left to solve.
  if (cur.purged)
    return {
      ok: false,
      status: 409,
      code: "purged",
      reason: "the task's params were erased by retention (TASK_RETENTION_DAYS); the client must submit it again",
    };
  if (cur.region !== d.region)
    return {
      ok: false,
      status: 409,
      code: "other_region",
      reason: `the task lives in region ${cur.region}; redrive it from that region's console`,
    };
  return { state: cur.state };
}

export async function redriveTask(
  d: RedriveDeps,
  id: string,
  actor: string,
  opts: RedriveOptions = {},
): Promise<RedriveResult> {
  const cur = await precheck(d, id);
  if ("ok" in cur) return cur;
  // The shared core (@pipeline/shared/tasks): requeue, publish under a new message id, undo on failure, event.
  const r = await redriveFailedTask(
    {
      requeue: async () => {
        const [row] = await d.sql<RequeuedSqlRow[]>`
          update tasks set state = 'queued', version = version + 1, attempts = 0, redrives = redrives + 1, provider_id = null,
            deadline_at = now() + ${`${d.deadlineMs} milliseconds`}::interval, completed_at = null, updated_at = now()
          where id = ${id} and state = 'failed' and params <> '{}'::jsonb
          returning id, type, priority, owner, version, redrives, deadline_at`;
        return (
          row && {
            id: row.id,
            type: row.type,
            priority: row.priority,
            owner: row.owner,
            version: row.version,
            redrives: row.redrives,
            deadlineAt: row.deadline_at,
          }
        );
      },
      publishTask: (msg, msgID) => publishTaskMessage(d.js, d.region, msg, msgID, d.publishDeadlineMs),
      ...(d.groups ? { groupOf: await d.groups() } : {}),
      undo: async (row) => {
        await d.sql`update tasks set state = 'failed', version = version + 1, completed_at = now(), updated_at = now() where id = ${id} and state = 'queued' and version = ${row.version}`;
      },
      publishEvent: (ev) =>
        publishWithRetry(
          d.js,
          eventSubject(d.region, ev.kind),
          JSON.stringify(ev),
          `${id}:${ev.version}:${ev.kind}`,
          d.publishDeadlineMs,
        ).then(
          () => {},
          () => {},
        ),
    },
    d.region,
    { by: actor },
  );
  if (!r.ok && r.code === "not_failed")
    return {
      ok: false,
      status: 409,
      code: "not_failed",
      reason: `the task is ${cur.state}; only failed (dead-lettered) tasks can be redriven`,
    };
  if (!r.ok)
    return {
      ok: false,
      status: 503,
      code: "queue_unavailable",
      reason: "the queue did not take the task; it stays failed, try again",
    };
  if (opts.audit !== false)
    await recordAudit(d.db, {
      actor,
      action: "task.redrive",
      detail: { taskId: id, redrives: r.row.redrives, via: "console" },
    });
  return { ok: true, id, redrives: r.row.redrives, deadlineAt: r.deadlineAt };
}
