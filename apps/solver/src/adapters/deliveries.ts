import { and, eq, isNull, sql } from "drizzle-orm";
import { tasks, webhookDeliveries, type Db, type TaskRow } from "@pipeline/shared/db";

export interface DeliveryStore {
  task(id: string): Promise<TaskRow | undefined>;
  /** Records the delivery if new; true when it was already acknowledged by the receiver. */
  begin(deliveryId: string, taskId: string, state: string): Promise<{ delivered: boolean; attempts: number }>;
  delivered(deliveryId: string, status: number): Promise<void>;
  failed(deliveryId: string, status: number | null, error: string): Promise<number>;
}

export function createDeliveryStore(db: Db): DeliveryStore {
  return {
    async task(id) {
      return (await db.select().from(tasks).where(eq(tasks.id, id)))[0];
    },
    async begin(deliveryId, taskId, state) {
      await db.insert(webhookDeliveries).values({ deliveryId, taskId, state }).onConflictDoNothing();
      const r = (await db.select().from(webhookDeliveries).where(eq(webhookDeliveries.deliveryId, deliveryId)))[0]!;
      return { delivered: r.deliveredAt !== null, attempts: r.attempts };
    },
    async delivered(deliveryId, status) {
      await db
        .update(webhookDeliveries)
        .set({ deliveredAt: sql`now()`, lastStatus: status, attempts: sql`${webhookDeliveries.attempts} + 1` })
        .where(and(eq(webhookDeliveries.deliveryId, deliveryId), isNull(webhookDeliveries.deliveredAt)));
    },
    async failed(deliveryId, status, error) {
      const r = await db
        .update(webhookDeliveries)
        .set({ lastStatus: status, lastError: error.slice(0, 500), attempts: sql`${webhookDeliveries.attempts} + 1` })
        .where(eq(webhookDeliveries.deliveryId, deliveryId))
        .returning({ attempts: webhookDeliveries.attempts });
      return r[0]?.attempts ?? 1;
    },
  };
}
