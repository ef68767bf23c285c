import { sql } from "drizzle-orm";
import { boolean, index, integer, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";

/** Where a report is: waiting to be sent, recorded by the provider, or refused by it. */
export type ReportState = "pending" | "sent" | "refused";

/**
 * A client's report on a solved task (good: accepted by the site; bad: refused), at most one per
 * task (the primary key). The gateway inserts it `pending`; a solver, which holds the provider
 * keys, forwards it (`res.php?action=reportgood|reportbad`), retrying until the provider answers,
 * and books the refund of a bad one in the ledger in the same transaction.
 */
export const taskReports = pgTable(
  "task_reports",
  {
    taskId: uuid("task_id").primaryKey(),
    owner: text("owner").notNull(),
    accepted: boolean("accepted").notNull(),
    taskType: text("task_type").notNull(),
    /** The site key of the task's page (googlekey/sitekey/gt), for acceptance rates per site. */
    sitekey: text("sitekey"),
    region: text("region").notNull(),
    providerTaskId: text("provider_task_id").notNull(),
    providerKeyRef: text("provider_key_ref").notNull(),
    state: text("state").$type<ReportState>().notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: timestamp("next_attempt_at", { withTimezone: true }).notNull().defaultNow(),
    /** The provider's last answer (a protocol code) or why the last attempt failed. */
    lastReply: text("last_reply"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    sentAt: timestamp("sent_at", { withTimezone: true }),
  },
  (t) => [index("task_reports_due_idx").on(t.nextAttemptAt).where(sql`state = 'pending'`)],
);
export type TaskReportRow = typeof taskReports.$inferSelect;
