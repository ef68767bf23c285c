import { and, eq, sql } from "drizzle-orm";
import { tasks, type Db, type NewTaskRow, type TaskRow } from "@pipeline/shared/db";

export interface TaskStore {
  /** Inserts a `queued` row; returns it, or undefined when the id already exists. */
  insertQueued(row: NewTaskRow): Promise<TaskRow | undefined>;
  get(id: string): Promise<TaskRow | undefined>;
  /** Removes a row we inserted but could not publish, if nothing happened to it since. */
  deleteUnpublished(id: string): Promise<void>;
  ping(): Promise<void>;
}

/** The gateway's Postgres adapter: it writes only fresh `queued` rows, and reads. */
export function createTaskStore(db: Db): TaskStore {
  return {
    async insertQueued(row) {
      const out = await db.insert(tasks).values(row).onConflictDoNothing({ target: tasks.id }).returning();
      return out[0];
    },
    async get(id) {
      const out = await db.select().from(tasks).where(eq(tasks.id, id)).limit(1);
      return out[0];
    },
    async deleteUnpublished(id) {
      await db.delete(tasks).where(and(eq(tasks.id, id), eq(tasks.state, "queued"), eq(tasks.version, 0)));
    },
    async ping() {
      await db.execute(sql`select 1`);
    },
  };
}
