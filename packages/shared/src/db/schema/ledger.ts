import { bigint, index, pgTable, primaryKey, text, timestamp, uuid } from "drizzle-orm/pg-core";

/** What a ledger entry records: a charge of the provider, or a refund it granted (negative). */
export type LedgerKind = "charge" | "refund";
/** Where an entry's amount comes from: the provider's own price (`get2`), or the configured price. */
export type PriceSource = "provider" | "estimate";

/**
 * The operator's money: one row per provider charge or refund, per task. Amounts are integer
 * micro-dollars (1 USD = 1,000,000), never floats. The key (task, kind, provider task) makes an
 * entry idempotent: a redelivered task or a second reader of the same answer books nothing twice.
 */
export const ledger = pgTable(
  "ledger",
  {
    taskId: uuid("task_id").notNull(),
    kind: text("kind").$type<LedgerKind>().notNull(),
    providerTaskId: text("provider_task_id").notNull(),
    /** The task's owner (its client id), never a key. */
    owner: text("owner").notNull(),
    taskType: text("task_type").notNull(),
    /** The provider account: its URL host and key reference (`host/key_…`), never the key. */
    provider: text("provider").notNull(),
    region: text("region").notNull(),
    solverVersion: text("solver_version").notNull(),
    amountMicros: bigint("amount_micros", { mode: "number" }).notNull(),
    priceSource: text("price_source").$type<PriceSource>().notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.taskId, t.kind, t.providerTaskId] }),
    index("ledger_owner_created_idx").on(t.owner, t.createdAt),
    index("ledger_created_idx").on(t.createdAt),
    // The task explorer's solver-version filter: a rare version's tasks are found from here, not by walking tasks.
    index("ledger_solver_version_idx").on(t.solverVersion, t.taskId),
  ],
);
export type LedgerRow = typeof ledger.$inferSelect;
