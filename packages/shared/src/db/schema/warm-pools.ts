import { sql } from "drizzle-orm";
import { bigint, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex, uuid } from "drizzle-orm/pg-core";

/**
 * A client's warm pool (docs/warm-pools.md): `size` solved tokens of one task type and params kept
 * ready, each replaced before it is `max_age_ms` old. Its tokens are ordinary tasks (`tasks.pool_id`).
 * A deleted pool keeps its row (`deleted_at`) so its tasks' figures still have a pool; the name
 * may be taken again by a new pool (a new id).
 */
export const warmPools = pgTable(
  "warm_pools",
  {
    id: uuid("id").primaryKey(),
    /** The client id that made it (never a key); another key sees no pool. */
    owner: text("owner").notNull(),
    name: text("name").notNull(),
    type: text("type").notNull(),
    params: jsonb("params").notNull(),
    priority: text("priority").notNull(),
    size: integer("size").notNull(),
    maxAgeMs: integer("max_age_ms").notNull(),
    /** Takes answered with a fresh task (no ready token): the pool's misses. */
    misses: bigint("misses", { mode: "number" }).notNull().default(0),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
    deletedAt: timestamp("deleted_at", { withTimezone: true }),
  },
  (t) => [
    uniqueIndex("warm_pools_owner_name_idx").on(t.owner, t.name).where(sql`deleted_at is null`),
    index("warm_pools_live_idx").on(t.createdAt).where(sql`deleted_at is null`),
  ],
);
export type WarmPoolRow = typeof warmPools.$inferSelect;
