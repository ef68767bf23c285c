// Booking a task's charge where the ledger keeps it (docs/money.md): on the task's row when the row
// holds no charge yet, else as a row of the `ledger` table. Either way `ledger_all` shows it once.
import type postgres from "postgres";

/** One provider charge of one task (micro-dollars; `provider` is `<host>/<key ref>`, never a key). */
export interface ChargeEntry {
  taskId: string;
  providerTaskId: string;
  provider: string;
  region: string;
  solverVersion: string;
  amountMicros: number;
  priceSource: string;
  /** When it was charged; default now() (a replay passes the event's time). */
  at?: Date;
}

/**
 * Books each charge once, whoever reads the answer and however often: a row without a charge takes
 * it in its `charge_*` columns (unless the ledger table already has it: a charge booked there
 * before the columns existed); a row whose columns hold another provider task's charge books it as
 * a ledger row (its key: `on conflict do nothing`). The rows are locked first (`for update` reads
 * a row's newest version after any writer in flight commits), and both the update and the insert
 * decide from what that read, so a completion booking the same charge at the same moment is seen,
 * never doubled. A charge of a task with no row (deleted) is not booked.
 */
export async function bookCharges(
  sql: postgres.Sql | postgres.TransactionSql,
  charges: readonly ChargeEntry[],
): Promise<void> {
  if (charges.length === 0) return;
  const col = <T>(f: (c: ChargeEntry) => T) => charges.map(f);
  await sql`
    with c as (
      select c.*, exists (select 1 from ledger e where e.task_id = c.id and e.kind = 'charge' and e.provider_task_id = c.ptid) as in_ledger
      from unnest(${col((c) => c.taskId)}::uuid[], ${col((c) => c.providerTaskId)}::text[], ${col((c) => c.provider)}::text[],
                  ${col((c) => c.region)}::text[], ${col((c) => c.solverVersion)}::text[], ${col((c) => String(c.amountMicros))}::bigint[],
                  ${col((c) => c.priceSource)}::text[], ${col((c) => c.at?.toISOString() ?? null)}::text[])
           as c(id, ptid, provider, region, solver_version, amount_micros, price_source, at)
    ), locked as (
      select t.id, t.owner, t.type, t.charged_at, t.charge_provider_task_id
      from tasks t where t.id in (select id from c) order by t.id for update
    ), on_row as (
      update tasks t
      set charge_provider_task_id = c.ptid, charge_provider = c.provider, charge_region = c.region,
          charge_solver_version = c.solver_version, charge_micros = c.amount_micros,
          charge_price_source = c.price_source, charged_at = coalesce(c.at::timestamptz, now())
      from c join locked l on l.id = c.id
      where t.id = c.id and l.charged_at is null and not c.in_ledger
      returning t.id
    )
    insert into ledger (task_id, kind, provider_task_id, owner, task_type, provider, region, solver_version, amount_micros, price_source, created_at)
    select l.id, 'charge', c.ptid, l.owner, l.type, c.provider, c.region, c.solver_version, c.amount_micros, c.price_source,
           coalesce(c.at::timestamptz, now())
    from c join locked l on l.id = c.id
    where not exists (select 1 from on_row r where r.id = c.id)
      and l.charge_provider_task_id is distinct from c.ptid
    on conflict do nothing`;
}
