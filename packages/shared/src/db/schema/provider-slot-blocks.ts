import { index, integer, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

/**
 * The provider's threads as leased blocks (issue 13): one row per (key reference, solver), not one
 * per task. A row is the solver's reservation for new submissions (`size` units, under a lease);
 * the provider tasks already running are counted from `tasks` (a provider id or a recent submit
 * marker), whoever holds them, so a dead solver's provider tasks stay counted until they end.
 * Leasing a block is one statement under a per-key advisory lock, a few times a second per
 * solver at most; a task writes no slot row at all (apps/solver/src/domain/slot-budget.ts).
 */
export const providerSlotBlocks = pgTable(
  "provider_slot_blocks",
  {
    keyRef: text("key_ref").notNull(),
    owner: text("owner").notNull(),
    /** Units granted at the last lease (reservations not yet visible in `tasks`). */
    size: integer("size").notNull(),
    /** The plan's threads this solver was configured with (what the console shows). */
    threads: integer("threads").notNull(),
    /** Units asked for at the last lease: above `size`, the solver is starved and others give back their spare. */
    wanted: integer("wanted").notNull(),
    leaseUntil: timestamp("lease_until", { withTimezone: true }).notNull(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.keyRef, t.owner] }), index("provider_slot_blocks_owner_idx").on(t.owner)],
);
export type ProviderSlotBlockRow = typeof providerSlotBlocks.$inferSelect;
