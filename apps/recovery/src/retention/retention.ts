// Data retention (issue 16.3): what the pipeline keeps of a finished task, and for how long.
// Three rules, each run in batches of short statements (one batch = one autocommit UPDATE or
// DELETE over at most `batch` rows picked with SKIP LOCKED), so a large table is never locked
// for long and a solver or gateway writing a row is never waited on:
//   1. tokens: a completed task's token (and user agent) is erased once it expired plus
//      `tokenGraceMs`; an answer without an expiry (image tasks) once the task is
//      `taskRetentionDays` old;
//   2. params (images included) and the callback URL of a finished task: replaced by `{}` / null
//      once it finished `taskRetentionDays` ago;
//   3. rows: a finished task, and its webhook_deliveries rows, deleted `rowRetentionDays` after
//      it finished.
// Only final states (completed, failed, cancelled) are touched, never the state or version of a
// row (no event is published, no guard of another writer changes). A task with a callback still
// pending keeps its params, callback URL and row until the dispatcher is done with it (it gives
// up after WEBHOOK_MAX_AGE_MS, 24 h). Every row of the local database is covered, replicas of
// other regions' tasks included: retention is the database's, not a transition of the task.
import type postgres from "postgres";
import type { RetentionMetrics } from "../metrics/registry.ts";

export interface RetentionPolicy {
  /** A completed task's token is erased this long after it expired. */
  tokenGraceMs: number;
  /** Params, images and callback URLs of finished tasks are erased after this many days. */
  taskRetentionDays: number;
  /** Finished rows are deleted after this many days. */
  rowRetentionDays: number;
  /** Rows per statement. */
  batch?: number;
  /** At most this many batches per rule and run (the next run goes on). */
  maxBatches?: number;
}

export interface RetentionReport {
  tokensErased: number;
  paramsPurged: number;
  rowsDeleted: number;
  deliveriesDeleted: number;
  batches: number;
  ms: number;
}

/** Runs `step` (one batch, returns rows touched) until a batch comes back short. */
async function drain(
  step: () => Promise<number>,
  batch: number,
  maxBatches: number,
): Promise<{ rows: number; batches: number }> {
  let rows = 0;
  let batches = 0;
  for (;;) {
    const n = await step();
    rows += n;
    batches++;
    if (n < batch || batches >= maxBatches) return { rows, batches };
  }
}

/** How a rule runs: rows per statement, and at most this many statements per run. */
interface Batching {
  batch: number;
  maxBatches: number;
}

/** Rule 3: finished rows older than `rowAge`, and their deliveries, deleted (one statement a batch: they go together); a row's charge moves to the ledger table. */
async function deleteOldRows(
  sql: postgres.Sql,
  rowAge: string,
  { batch, maxBatches }: Batching,
): Promise<{ rows: number; batches: number; deliveries: number }> {
  let deliveries = 0;
  const rows = await drain(
    async () => {
      const [r] = await sql<{ tasks: number; deliveries: number }[]>`
        with gone as (
          delete from tasks t where t.id in (
            select id from tasks
            where state in ('completed', 'failed', 'cancelled') and coalesce(completed_at, updated_at) < now() - ${rowAge}::interval
              and not exists (select 1 from webhook_deliveries d where d.status = 'pending' and d.task_id = tasks.id)
            limit ${batch} for update skip locked)
          returning t.id, t.owner, t.type, t.charge_provider_task_id, t.charge_provider, t.charge_region,
                    t.charge_solver_version, t.charge_micros, t.charge_price_source, t.charged_at),
        -- The charge a row holds outlives the row: the ledger keeps money past task retention.
        kept as (
          insert into ledger (task_id, kind, provider_task_id, owner, task_type, provider, region, solver_version, amount_micros, price_source, created_at)
          select id, 'charge', charge_provider_task_id, owner, type, charge_provider, charge_region, charge_solver_version,
                 charge_micros, charge_price_source, charged_at
          from gone where charged_at is not null
          on conflict do nothing),
        deliveries as (delete from webhook_deliveries d using gone where d.task_id = gone.id returning 1)
        select (select count(*) from gone)::int as tasks, (select count(*) from deliveries)::int as deliveries`;
      deliveries += r?.deliveries ?? 0;
      return r?.tasks ?? 0;
    },
    batch,
    maxBatches,
  );
  return { ...rows, deliveries };
}

/**
 * Rule 1, in two statements, each an index range on tasks_token_expiry_idx: tokens past expiry +
 * grace, then answers without expiry (image tasks) of tasks finished TASK_RETENTION_DAYS ago.
 */
async function eraseTokens(
  sql: postgres.Sql,
  grace: string,
  taskAge: string,
  { batch, maxBatches }: Batching,
): Promise<{ rows: number; batches: number }> {
  const erase = (which: "expired" | "no-expiry") =>
    drain(
      async () => {
        const r = await sql`
          update tasks t set token = null, user_agent = null
          where t.id in (
            select id from tasks
            where token is not null and state = 'completed'
              and ${which === "expired" ? sql`token_expires_at < now() - ${grace}::interval` : sql`token_expires_at is null and coalesce(completed_at, updated_at) < now() - ${taskAge}::interval`}
            limit ${batch} for update skip locked)`;
        return r.count;
      },
      batch,
      maxBatches,
    );
  const expiredTokens = await erase("expired");
  const answers = await erase("no-expiry");
  return { rows: expiredTokens.rows + answers.rows, batches: expiredTokens.batches + answers.batches };
}

/** Rule 2: params and callback URL of a task finished `taskAge` ago, unless a callback is still pending. */
function purgeParams(
  sql: postgres.Sql,
  taskAge: string,
  { batch, maxBatches }: Batching,
): Promise<{ rows: number; batches: number }> {
  return drain(
    async () => {
      const r = await sql`
        update tasks t set params = '{}'::jsonb, callback_url = null
        where t.id in (
          select id from tasks
          where state in ('completed', 'failed', 'cancelled') and coalesce(completed_at, updated_at) < now() - ${taskAge}::interval
            and (params <> '{}'::jsonb or callback_url is not null)
            and not exists (select 1 from webhook_deliveries d where d.status = 'pending' and d.task_id = tasks.id)
          limit ${batch} for update skip locked)`;
      return r.count;
    },
    batch,
    maxBatches,
  );
}

export async function runRetention(
  sql: postgres.Sql,
  p: RetentionPolicy,
  metrics?: RetentionMetrics,
): Promise<RetentionReport> {
  const started = Date.now();
  const batching = { batch: p.batch ?? 1000, maxBatches: p.maxBatches ?? 1000 };
  const taskAge = `${p.taskRetentionDays} days`;
  try {
    // Rows first: nothing is rewritten that is about to go.
    const rows = await deleteOldRows(sql, `${p.rowRetentionDays} days`, batching);
    metrics?.rows("row_deleted", rows.rows);
    metrics?.rows("delivery_deleted", rows.deliveries);
    const tokens = await eraseTokens(sql, `${p.tokenGraceMs} milliseconds`, taskAge, batching);
    metrics?.rows("token_erased", tokens.rows);
    const params = await purgeParams(sql, taskAge, batching);
    metrics?.rows("params_purged", params.rows);
    const report = {
      tokensErased: tokens.rows,
      paramsPurged: params.rows,
      rowsDeleted: rows.rows,
      deliveriesDeleted: rows.deliveries,
      batches: tokens.batches + params.batches + rows.batches,
      ms: Date.now() - started,
    };
    metrics?.run("ok", report.ms);
    return report;
  } catch (err) {
    metrics?.run("error", Date.now() - started);
    throw err;
  }
}
