import { sql } from "drizzle-orm";
import { index, integer, pgTable, primaryKey, text, timestamp, uuid } from "drizzle-orm/pg-core";

/**
 * Unused since the plan is leased in blocks (provider-slot-blocks.ts, issue 13): one row per
 * (key reference, slot), taken by a task before its submit and given back after its answer.
 * Kept for one version so that a solver of the previous version, still running during an
 * upgrade, finds its table; drop it in the next migration.
 */
export const providerSlots = pgTable(
  "provider_slots",
  {
    keyRef: text("key_ref").notNull(),
    slot: integer("slot").notNull(),
    owner: text("owner"),
    taskId: uuid("task_id"),
    leaseUntil: timestamp("lease_until", { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.keyRef, t.slot] }),
    // "my slot" (a redelivered task finds the slot it parked) and "a free slot" in one index
    // probe each, instead of a scan of every slot of the key per acquire.
    index("provider_slots_task_idx").on(t.keyRef, t.taskId),
    index("provider_slots_free_idx").on(t.keyRef, t.slot).where(sql`${t.taskId} is null`),
  ],
);
export type ProviderSlotRow = typeof providerSlots.$inferSelect;
