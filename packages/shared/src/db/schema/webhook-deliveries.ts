import { sql } from "drizzle-orm";
import { index, integer, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";

/** Where a delivery stands: `pending` until the receiver answers 2xx (`delivered`) or it ends otherwise. */
export const DELIVERY_STATUSES = ["pending", "delivered", "failed", "refused", "superseded"] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/**
 * One row per (task, final state, redrive) callback, and the durable retry record: the notifier
 * creates it from the event (then acks the event), the solvers' dispatchers send it when
 * `next_attempt_at` is due, holding a lease (`lease_until`, `lease_owner`) while they do.
 * `delivered` once the receiver acknowledged it, never sent again; `failed` when the retry limit
 * (count or age) ran out; `refused` when the SSRF policy refused the URL or its addresses at send
 * time; `superseded` when the task moved on (a redrive) before it was sent.
 */
export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    deliveryId: text("delivery_id").primaryKey(),
    taskId: uuid("task_id").notNull(),
    state: text("state").notNull(),
    /** The task's owner (client id): the per-tenant in-flight cap counts by it. */
    owner: text("owner").notNull().default(""),
    /** `host[:port]` of the callback URL: the per-host in-flight cap counts by it. */
    host: text("host").notNull().default(""),
    status: text("status").$type<DeliveryStatus>().notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: timestamp("next_attempt_at", { withTimezone: true }).notNull().defaultNow(),
    leaseUntil: timestamp("lease_until", { withTimezone: true }),
    leaseOwner: text("lease_owner"),
    lastStatus: integer("last_status"),
    lastError: text("last_error"),
    deliveredAt: timestamp("delivered_at", { withTimezone: true }),
    /** When it ended as failed, refused or superseded. */
    failedAt: timestamp("failed_at", { withTimezone: true }),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    // The dispatchers' "what is due" scan, and the in-flight counts of the caps, over pending rows only.
    index("webhook_deliveries_due_idx").on(t.nextAttemptAt).where(sql`${t.status} = 'pending'`),
    // Retention deletes a task's deliveries with it.
    index("webhook_deliveries_task_idx").on(t.taskId),
  ],
);
export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;
