import type { Db } from "@pipeline/shared/db";
import { sql } from "drizzle-orm";

/** A report due to be sent, with what its task's charge says (provider, version, amount). */
export interface DueReport {
  taskId: string;
  accepted: boolean;
  taskType: string;
  sitekey: string | null;
  providerTaskId: string;
  providerKeyRef: string;
  /** Calls made for it so far, this one included. */
  attempts: number;
  /** From the task's charge in the ledger; null when none is booked. */
  provider: string | null;
  solverVersion: string | null;
}

export interface ReportQueue {
  /**
   * Takes up to `limit` due reports of the key `keyRef` (the key in use: only it calls the
   * provider), counting an attempt and holding each for `holdMs` (another solver skips it
   * meanwhile, and takes it up after, should this one die mid-call).
   */
  take(keyRef: string, limit: number, holdMs: number): Promise<DueReport[]>;
  /**
   * The provider recorded the report: `sent`, and for a bad one the refund booked in the ledger in
   * the same transaction (the task's charge negated; `estimateMicros` when no charge is booked).
   */
  recorded(
    r: DueReport,
    reply: string,
    refund: { provider: string; region: string; solverVersion: string; estimateMicros: number },
  ): Promise<void>;
  /** The provider refused the report for good (or it was given up): `refused`, nothing refunded. */
  refused(r: DueReport, reply: string): Promise<void>;
  /** Tried again after `delayMs`. */
  retry(r: DueReport, reply: string, delayMs: number): Promise<void>;
}

/** Reports in Postgres (`task_reports`), claimed with SKIP LOCKED so solvers share them. */
export function createReportQueue(db: Db): ReportQueue {
  return {
    async take(keyRef, limit, holdMs) {
      const rows = await db.execute<Record<string, unknown>>(sql`
        with due as (
          select task_id from task_reports
          where state = 'pending' and next_attempt_at <= now() and provider_key_ref = ${keyRef}
          order by next_attempt_at limit ${limit} for update skip locked
        ), taken as (
          update task_reports r set attempts = r.attempts + 1, next_attempt_at = now() + ${`${holdMs} milliseconds`}::interval
          from due where r.task_id = due.task_id
          returning r.*
        )
        select t.*, l.provider, l.solver_version from taken t
        left join ledger_all l on l.task_id = t.task_id and l.kind = 'charge' and l.provider_task_id = t.provider_task_id`);
      return [...rows].map((r) => ({
        taskId: String(r.task_id),
        accepted: r.accepted === true,
        taskType: String(r.task_type),
        sitekey: (r.sitekey as string | null) ?? null,
        providerTaskId: String(r.provider_task_id),
        providerKeyRef: String(r.provider_key_ref),
        attempts: Number(r.attempts),
        provider: (r.provider as string | null) ?? null,
        solverVersion: (r.solver_version as string | null) ?? null,
      }));
    },
    async recorded(r, reply, refund) {
      await db.transaction(async (tx) => {
        const done = await tx.execute(sql`
          update task_reports set state = 'sent', sent_at = now(), last_reply = ${reply}
          where task_id = ${r.taskId} and state = 'pending' returning task_id`);
        if (done.length === 0 || r.accepted) return;
        // The refund mirrors the task's charge (amount, provider, version); without one, the estimate.
        await tx.execute(sql`
          insert into ledger (task_id, kind, provider_task_id, owner, task_type, provider, region, solver_version, amount_micros, price_source)
          select r.task_id, 'refund', r.provider_task_id, r.owner, r.task_type,
                 coalesce(c.provider, ${refund.provider}), coalesce(c.region, ${refund.region}),
                 coalesce(c.solver_version, ${refund.solverVersion}),
                 -coalesce(c.amount_micros, ${refund.estimateMicros}), coalesce(c.price_source, 'estimate')
          from task_reports r
          left join ledger_all c on c.task_id = r.task_id and c.kind = 'charge' and c.provider_task_id = r.provider_task_id
          where r.task_id = ${r.taskId}
          on conflict do nothing`);
      });
    },
    async refused(r, reply) {
      await db.execute(sql`
        update task_reports set state = 'refused', last_reply = ${reply} where task_id = ${r.taskId} and state = 'pending'`);
    },
    async retry(r, reply, delayMs) {
      await db.execute(sql`
        update task_reports set next_attempt_at = now() + ${`${delayMs} milliseconds`}::interval, last_reply = ${reply}
        where task_id = ${r.taskId} and state = 'pending'`);
    },
  };
}
