import type { Db } from "@pipeline/shared/db";
import { sql } from "drizzle-orm";

/** One key's money from the ledger over a window, in integer micro-dollars. */
export interface Spend {
  chargedMicros: number;
  refundedMicros: number;
  /** Charged less refunded. */
  netMicros: number;
  charges: number;
  refunds: number;
  /** Entries whose amount is the configured price, not the provider's (PROVIDER_PRICE_READ off, or no price said). */
  estimatedEntries: number;
}

export interface SpendSource {
  /** The ledger's entries of `owner` (a client id) created since `from`. */
  since(owner: string, from: Date): Promise<Spend>;
}

/** Spend read from the `ledger` table (its `(owner, created_at)` index: one key's range). */
export function createSpendSource(db: Db): SpendSource {
  return {
    async since(owner, from) {
      const [r] = await db.execute<{
        charged: string;
        refunded: string;
        charges: number;
        refunds: number;
        est: number;
      }>(sql`
        select coalesce(sum(amount_micros) filter (where kind = 'charge'), 0)::text as charged,
               coalesce(-sum(amount_micros) filter (where kind = 'refund'), 0)::text as refunded,
               count(*) filter (where kind = 'charge')::int as charges,
               count(*) filter (where kind = 'refund')::int as refunds,
               count(*) filter (where price_source = 'estimate')::int as est
        from ledger_all where owner = ${owner} and created_at >= ${from.toISOString()}::timestamptz`);
      const charged = Number(r!.charged);
      const refunded = Number(r!.refunded);
      return {
        chargedMicros: charged,
        refundedMicros: refunded,
        netMicros: charged - refunded,
        charges: r!.charges,
        refunds: r!.refunds,
        estimatedEntries: r!.est,
      };
    },
  };
}
