import { integer, pgTable, primaryKey, text, timestamp, uuid } from "drizzle-orm/pg-core";

/**
 * The provider's threads as rows: one row per (key reference, slot). A solver holds a slot from
 * before a submit until the answer is read, under a lease, so the number of provider tasks in
 * flight per key never exceeds the plan's threads across every solver process.
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
  (t) => [primaryKey({ columns: [t.keyRef, t.slot] })],
);
export type ProviderSlotRow = typeof providerSlots.$inferSelect;
