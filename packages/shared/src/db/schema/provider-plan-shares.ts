import { integer, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/**
 * With several regions, this region's share of a provider account's thread plan (one row per key
 * reference), written by the region's lease keeper (apps/recovery/src/regions/plan-keeper.ts) from
 * the plan record in the witness's KV. The solvers lease their blocks against `threads` while
 * `valid_until` (the region lease's own end) has not passed, and against none after: a region
 * cut off from the witness starts nothing new once its lease lapses. One region: no rows, the
 * solvers use PROVIDER_THREADS.
 */
export const providerPlanShares = pgTable("provider_plan_shares", {
  keyRef: text("key_ref").primaryKey(),
  threads: integer("threads").notNull(),
  validUntil: timestamp("valid_until", { withTimezone: true }).notNull(),
  updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
});
export type ProviderPlanShareRow = typeof providerPlanShares.$inferSelect;
