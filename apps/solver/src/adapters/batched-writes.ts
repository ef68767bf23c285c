import { bookCharges, driverRowMapper, groupCommit, isConnectionError, type TaskRow, tasks } from "@pipeline/shared/db";
import type postgres from "postgres";
import type { Charge } from "../domain/charge.ts";

/**
 * The solver's per-task state transitions, group-committed: the claims (or completions)
 * arriving while one statement runs go together in the next, as one
 * `UPDATE … FROM unnest(…)`. Each request keeps its own guard (state, lease owner) inside the
 * statement, so a batch changes exactly the rows the same calls one by one would have changed;
 * two requests for one row never share a statement (group-commit `key`). Under load this turns
 * thousands of single-row commits (and socket writes) per second into a few dozen statements.
 */
export interface BatchedWrites {
  /**
   * queued|retrying -> solving, or takes over an expired (or own) `solving` lease; undefined when
   * not claimable. A row without a provider id and without another worker's submit marker gets
   * this worker's marker in the same write (issue 13: claim and submit marker in one write): the
   * claimer submits next. The returned row says whether it did (`submitOwner`).
   */
  claim(r: { id: string; worker: string; leaseMs: number }): Promise<TaskRow | undefined>;
  /** Marks an in.php call as started, if the task is still ours. */
  beginSubmit(r: { id: string; worker: string }): Promise<boolean>;
  /** Completes the task, if this worker still holds its lease. */
  complete(r: CompleteRequest): Promise<Completed | undefined>;
}

export interface CompleteRequest {
  id: string;
  worker: string;
  token: string;
  userAgent: string | null;
  expiresAt: Date | null;
  polls: number;
  /** The answer's cost, booked (once per task and provider task: on the row, else in the ledger table) whether or not the completion applies. */
  charge?: Charge | null;
}

/**
 * What a completion reports back: only what the caller does not already hold (not the row: at
 * thousands of completions a second, whole rows back were most of the solver's garbage).
 */
export interface Completed {
  version: number;
  createdAt: Date;
  completedAt: Date;
  providerId: string | null;
  /** Whether the task has a callback URL (the `completed` event says so: the notifier reads no row without one). */
  callback: boolean;
}

const toTaskRow = driverRowMapper(tasks);

// `(t.state || '')` in the guards below, not `t.state`: the same test, in a form no index serves,
// so the planner finds each row by its primary key (a nested loop over the batch). Given `t.state`
// it scanned `tasks_open_idx` instead, trusting statistics taken when the table was small and
// blind to the dead entries every state change leaves in that index until a vacuum: ~400 heap
// pages read for a batch of 8 rows, the claim alone 1.3 ms a statement (bench/profile.ts with
// PROFILE_EXPLAIN=1 shows the plans). checkpoints.ts does the same.
type Raw = Record<string, unknown> & { id: string };

/**
 * `region`: claims only rows whose home is this region. A row replicated from another region,
 * or adopted away from this one during a failover (docs/regions.md), is never claimed here.
 */
export function createBatchedWrites(
  sql: postgres.Sql,
  o: { maxBatch?: number; maxInFlight?: number; region?: string } = {},
): BatchedWrites {
  const opts = { ...o, batchWide: isConnectionError };
  const byId = <R extends { id: string }>(batch: R[], rows: Raw[]) => {
    const found = new Map(rows.map((r) => [r.id, r]));
    return batch.map((b) => found.get(b.id));
  };

  const claim = groupCommit(
    async (batch: Array<{ id: string; worker: string; leaseMs: number }>) => {
      const rows = await sql<Raw[]>`
        update tasks t
        set state = 'solving', version = t.version + 1, attempts = t.attempts + 1, lease_owner = v.worker,
            lease_until = now() + v.lease_ms * interval '1 millisecond',
            started_at = coalesce(t.started_at, now()), updated_at = now(),
            submit_started_at = case when t.provider_id is null and (t.submit_started_at is null or t.submit_owner = v.worker) then now() else t.submit_started_at end,
            submit_owner = case when t.provider_id is null and (t.submit_started_at is null or t.submit_owner = v.worker) then v.worker else t.submit_owner end,
            claimed_at = case when t.provider_id is null and (t.submit_started_at is null or t.submit_owner = v.worker) then now() end
        from unnest(${batch.map((b) => b.id)}::uuid[], ${batch.map((b) => b.worker)}::text[], ${batch.map((b) => String(b.leaseMs))}::int[])
             as v(id, worker, lease_ms)
        where t.id = v.id
          and (${o.region ?? null}::text is null or t.region = ${o.region ?? null})
          and ((t.state || '') in ('queued', 'retrying')
               or ((t.state || '') = 'solving' and (t.lease_until is null or t.lease_until < now() or t.lease_owner = v.worker)))
        returning t.*`;
      return byId(batch, rows).map((r) => (r ? toTaskRow(r) : undefined));
    },
    { ...opts, key: (r) => r.id },
  );

  const beginSubmit = groupCommit(
    async (batch: Array<{ id: string; worker: string }>) => {
      const rows = await sql<Raw[]>`
        update tasks t set submit_started_at = now(), submit_owner = v.worker
        from unnest(${batch.map((b) => b.id)}::uuid[], ${batch.map((b) => b.worker)}::text[]) as v(id, worker)
        where t.id = v.id and (t.state || '') = 'solving' and t.lease_owner = v.worker
        returning t.id`;
      return byId(batch, rows).map((r) => r !== undefined);
    },
    { ...opts, key: (r) => r.id },
  );

  const complete = groupCommit(
    async (batch: CompleteRequest[]) => {
      const col = (f: (c: Charge) => string) => batch.map((b) => (b.charge ? f(b.charge) : null));
      // Timestamps go as text: drizzle turns postgres.js's timestamptz[] serializer off. No slot
      // row to free (issue 13): the provider plan counts the tasks with a provider id that are
      // still solving or retrying, and this write is the one that ends that. The charge goes on
      // the row in the same write when the row has none (`bk`: the common case, one row write per
      // completion, no ledger row); `booked` says whether the row holds it afterwards. A charge
      // the row did not take (the completion did not apply: another worker holds the task; or the
      // row holds another provider task's charge) is booked after, by bookCharges: the answer was
      // read, so the provider charged, whoever completes. `materialized`: the ledger probe runs
      // once per row; inlined, the planner ran it once for each of the seven `bk` columns (seven
      // index probes per row, PROFILE_EXPLAIN=2 bun bench/profile.ts shows the plan).
      const bk = sql`v.ptid is not null and t.charged_at is null and not v.in_ledger`;
      const rows = await sql<Raw[]>`
        with v as materialized (
          select v.*, v.ptid is not null and exists (select 1 from ledger e where e.task_id = v.id and e.kind = 'charge' and e.provider_task_id = v.ptid) as in_ledger
          from unnest(${batch.map((b) => b.id)}::uuid[], ${batch.map((b) => b.worker)}::text[], ${batch.map((b) => b.token)}::text[],
                      ${batch.map((b) => b.userAgent)}::text[], ${batch.map((b) => b.expiresAt?.toISOString() ?? null)}::text[],
                      ${batch.map((b) => String(b.polls))}::int[],
                      ${col((c) => c.providerTaskId)}::text[], ${col((c) => c.provider)}::text[], ${col((c) => c.region)}::text[],
                      ${col((c) => c.solverVersion)}::text[], ${col((c) => String(c.amountMicros))}::bigint[], ${col((c) => c.priceSource)}::text[])
               as v(id, worker, token, ua, expires, polls, ptid, provider, region, solver_version, amount_micros, price_source)
        )
        update tasks t
        set state = 'completed', version = t.version + 1, token = v.token, user_agent = v.ua,
            token_expires_at = v.expires::timestamptz, provider_polls = t.provider_polls + v.polls,
            lease_owner = null, lease_until = null, error_code = null, error_message = null,
            completed_at = now(), updated_at = now(),
            charge_provider_task_id = case when ${bk} then v.ptid else t.charge_provider_task_id end,
            charge_provider = case when ${bk} then v.provider else t.charge_provider end,
            charge_region = case when ${bk} then v.region else t.charge_region end,
            charge_solver_version = case when ${bk} then v.solver_version else t.charge_solver_version end,
            charge_micros = case when ${bk} then v.amount_micros else t.charge_micros end,
            charge_price_source = case when ${bk} then v.price_source else t.charge_price_source end,
            charged_at = case when ${bk} then now() else t.charged_at end
        from v
        where t.id = v.id and (t.state || '') = 'solving' and t.lease_owner = v.worker
        returning t.id, t.version, t.created_at, t.completed_at, t.provider_id, t.callback_url is not null as callback,
                  t.charge_provider_task_id is not distinct from v.ptid as booked`;
      const found = byId(batch, rows);
      const unbooked = batch.filter((b, i) => b.charge && found[i]?.booked !== true);
      if (unbooked.length > 0)
        await bookCharges(
          sql,
          unbooked.map((b) => ({ taskId: b.id, ...b.charge! })),
        );
      return found.map((r) =>
        r
          ? {
              version: Number(r.version),
              createdAt: new Date(r.created_at as string | Date),
              completedAt: new Date(r.completed_at as string | Date),
              providerId: (r.provider_id as string | null) ?? null,
              callback: r.callback === true,
            }
          : undefined,
      );
    },
    { ...opts, key: (r) => r.id },
  );

  return { claim, beginSubmit, complete };
}
