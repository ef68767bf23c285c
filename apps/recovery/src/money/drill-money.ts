// What a drill cost: the ledger's charges of the drill's tasks, and what they cost beyond one
// charge per task (a task the provider solved twice: a resubmission after a lost checkpoint, an
// adopted task submitted again). Beside RPO and RTO in every drill's receipt.
import type postgres from "postgres";

export interface DrillMoney {
  /** Tasks of the drill the ledger charged. */
  tasks: number;
  charges: number;
  totalMicros: number;
  /** Charges beyond the first of each task, and their sum. */
  extraCharges: number;
  extraMicros: number;
}

/** The ledger's figures for these tasks (charges only; refunds are the clients' verdicts, not the drill's). */
export async function drillMoney(sql: postgres.Sql, taskIds: string[]): Promise<DrillMoney> {
  const [r] = await sql<{ tasks: number; charges: number; total: string; extra_charges: number; extra: string }[]>`
    with c as (
      select task_id, amount_micros, row_number() over (partition by task_id order by created_at, provider_task_id) as n
      from ledger_all where kind = 'charge' and task_id = any(${taskIds}::uuid[]))
    select count(distinct task_id)::int as tasks, count(*)::int as charges,
      coalesce(sum(amount_micros), 0)::text as total,
      (count(*) filter (where n > 1))::int as extra_charges,
      coalesce(sum(amount_micros) filter (where n > 1), 0)::text as extra
    from c`;
  return {
    tasks: r!.tasks,
    charges: r!.charges,
    totalMicros: Number(r!.total),
    extraCharges: r!.extra_charges,
    extraMicros: Number(r!.extra),
  };
}

const dollars = (micros: number) => `$${(micros / 1_000_000).toFixed(5)}`;

/** `money: $0.43500 for 300 tasks (ledger); extra $0.00290 (2 charges beyond one per task)`. */
export function moneyLine(m: DrillMoney): string {
  return `money: ${dollars(m.totalMicros)} for ${m.tasks} task(s) (ledger); extra ${dollars(m.extraMicros)} (${m.extraCharges} charge(s) beyond one per task)`;
}
