import { bigint, bigserial, index, integer, jsonb, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/** What opened an incident (docs/incidents.md). */
export type IncidentKind = "failover" | "rollback" | "restore" | "breaker" | "drill";

/** One line of an incident's timeline: when, where it was read, what happened. */
export interface IncidentEvent {
  at: string;
  source: string;
  what: string;
}

/**
 * Real incidents and drills, one row each: opened when detected, closed when their recovery is
 * seen. `key` names the source event (`failover:<region>:<epoch>`, `rollback:<rollout id>`...), so
 * a restart or a second service seeing the same thing opens no second row. Times are the
 * incident's own (start, detection, recovery, end); figures are null where unknown.
 */
export const incidents = pgTable(
  "incidents",
  {
    id: bigserial("id", { mode: "number" }).primaryKey(),
    key: text("key").notNull().unique(),
    kind: text("kind").$type<IncidentKind>().notNull(),
    region: text("region").notNull(),
    summary: text("summary").notNull(),
    startedAt: timestamp("started_at", { withTimezone: true }).notNull(),
    detectedAt: timestamp("detected_at", { withTimezone: true }),
    recoveredAt: timestamp("recovered_at", { withTimezone: true }),
    /** Null while the incident is open. */
    endedAt: timestamp("ended_at", { withTimezone: true }),
    tasksAffected: integer("tasks_affected"),
    rpo: integer("rpo"),
    rtoMs: bigint("rto_ms", { mode: "number" }),
    extraPaid: integer("extra_paid"),
    extraMicros: bigint("extra_micros", { mode: "number" }),
    detail: jsonb("detail").$type<Record<string, unknown>>().notNull().default({}),
    timeline: jsonb("timeline").$type<IncidentEvent[]>().notNull().default([]),
    openedAt: timestamp("opened_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("incidents_started_idx").on(t.startedAt)],
);
export type IncidentRow = typeof incidents.$inferSelect;
