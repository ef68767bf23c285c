import { bigserial, index, jsonb, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/**
 * Who changed what and when: key rotations, config changes and rollbacks, drills. Details name
 * keys by name or hash reference, never by value.
 */
export const auditLog = pgTable(
  "audit_log",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    at: timestamp("at", { withTimezone: true }).notNull().defaultNow(),
    actor: text("actor").notNull(),
    action: text("action").notNull(),
    detail: jsonb("detail").notNull(),
  },
  (t) => [index("audit_log_at_idx").on(t.at)],
);
export type AuditRow = typeof auditLog.$inferSelect;
