import { integer, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";

/** One row per (task, final state) callback: delivered once acknowledged, never sent again. */
export const webhookDeliveries = pgTable("webhook_deliveries", {
  deliveryId: text("delivery_id").primaryKey(),
  taskId: uuid("task_id").notNull(),
  state: text("state").notNull(),
  attempts: integer("attempts").notNull().default(0),
  lastStatus: integer("last_status"),
  lastError: text("last_error"),
  deliveredAt: timestamp("delivered_at", { withTimezone: true }),
  createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
});
export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;
