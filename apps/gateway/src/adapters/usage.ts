import type { Db } from "@pipeline/shared/db";
import { sql } from "drizzle-orm";
import type { UsageSource } from "../domain/quotas.ts";

/**
 * The quota figures from Postgres, both bounded reads: the open tasks by owner (the partial index
 * `tasks_open_idx` holds only unfinished rows), and one key's rows created since the last settled
 * point (`tasks_owner_created_idx` on (owner, created_at): a range of the last seconds).
 */
export function createUsageSource(db: Db): UsageSource {
  return {
    async openByOwner() {
      const rows = await db.execute<{ owner: string; n: number }>(
        sql`select owner, count(*)::int as n from tasks where state in ('queued','solving','retrying') group by owner`,
      );
      return new Map([...rows].map((r) => [r.owner, r.n]));
    },
    async createdSince(owner, from, dayEnd, settleMs) {
      const rows = [
        ...(await db.execute<{ type: string; settled: boolean; n: number; settled_to: string | Date }>(sql`
          with b as (select greatest(${from.toISOString()}::timestamptz, least(now() - ${`${settleMs} milliseconds`}::interval, ${dayEnd.toISOString()}::timestamptz)) as settled_to)
          select t.type, t.created_at < b.settled_to as settled, count(*)::int as n, b.settled_to
          from b left join tasks t on t.owner = ${owner} and t.created_at >= ${from.toISOString()}::timestamptz and t.created_at < ${dayEnd.toISOString()}::timestamptz
          group by t.type, settled, b.settled_to`)),
      ];
      const settledTo = rows[0] ? new Date(rows[0].settled_to) : from;
      return {
        settledTo,
        rows: rows.filter((r) => r.type !== null).map((r) => ({ type: r.type, settled: r.settled, n: r.n })),
      };
    },
  };
}
