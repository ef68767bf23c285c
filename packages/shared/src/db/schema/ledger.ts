import { bigint, index, pgTable, pgView, primaryKey, text, timestamp, uuid } from "drizzle-orm/pg-core";

/** What a ledger entry records: a charge of the provider, or a refund it granted (negative). */
export type LedgerKind = "charge" | "refund";
/** Where an entry's amount comes from: the provider's own price (`get2`), or the configured price. */
export type PriceSource = "provider" | "estimate";

/**
 * The operator's money, with the charges on task rows (tasks.ts, `charge_*`): one row per provider
 * charge or refund, per task, that is not a completed task's own charge (refunds; a task's further
 * charges; the charges of rows retention deleted; those booked before the columns existed). Read
 * `ledgerAll` (the view `ledger_all`), which is every entry. Amounts are integer micro-dollars
 * (1 USD = 1,000,000), never floats. The key (task, kind, provider task) makes an entry
 * idempotent: a redelivered task or a second reader of the same answer books nothing twice.
 */
/** An entry's columns, fresh builders for each relation (the table and the view share them). */
const entryColumns = () => ({
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
});

export const ledger = pgTable("ledger", entryColumns(), (t) => [
  primaryKey({ columns: [t.taskId, t.kind, t.providerTaskId] }),
  index("ledger_owner_created_idx").on(t.owner, t.createdAt),
  index("ledger_created_idx").on(t.createdAt),
  // The task explorer's solver-version filter: a rare version's tasks are found from here, not by walking tasks.
  index("ledger_solver_version_idx").on(t.solverVersion, t.taskId),
]);
export type LedgerRow = typeof ledger.$inferSelect;

/**
 * Every ledger entry: the `ledger` table's rows and each completed task's charge on its row (the
 * view is made by migration 0019, by hand: drizzle-kit does not manage it).
 */
export const ledgerAll = pgView("ledger_all", entryColumns()).existing();
