import { bigint, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

/**
 * The provider accounts' balances as the provider said them (`res.php?action=getbalance`), one row
 * per sample: a solver of each region reads the balance of the key in use at most every
 * BALANCE_POLL_MS (apps/solver/src/balance). Integer micro-dollars parsed from the decimal text,
 * never floats. The account is named as the ledger names it (`host/key_…`), never by its key.
 */
export const providerBalances = pgTable(
  "provider_balances",
  {
    /** The ledger's name of the account: its URL host and key reference. */
    provider: text("provider").notNull(),
    /** The key's reference (`key_…`, a hash prefix), never the key. */
    keyRef: text("key_ref").notNull(),
    region: text("region").notNull(),
    balanceMicros: bigint("balance_micros", { mode: "number" }).notNull(),
    sampledAt: timestamp("sampled_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.provider, t.sampledAt, t.region] })],
);
export type ProviderBalanceRow = typeof providerBalances.$inferSelect;
