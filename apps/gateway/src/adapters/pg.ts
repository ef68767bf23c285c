import { and, eq, inArray, sql } from "drizzle-orm";
import { isConnectionError, tasks, type Db, type NewTaskRow, type TaskRow } from "@pipeline/shared/db";

export interface TaskStore {
  /** Inserts a `queued` row; returns it, or undefined when the id already exists. */
  insertQueued(row: NewTaskRow): Promise<TaskRow | undefined>;
  get(id: string): Promise<TaskRow | undefined>;
  /** Removes a row we inserted but could not publish, if nothing happened to it since. */
  deleteUnpublished(id: string): Promise<void>;
  ping(): Promise<void>;
  /** Cancels a task that is not terminal; undefined when it is not the client's or already final. */
  cancel(id: string, owner: string): Promise<TaskRow | undefined>;
  /** failed -> queued with a fresh deadline and attempt count (a dead-letter redrive). */
  redrive(id: string, owner: string, deadlineMs: number): Promise<TaskRow | undefined>;
  /** Undoes a redrive whose publish failed. */
  undoRedrive(row: TaskRow): Promise<void>;
}

/** The gateway's Postgres adapter: it writes only fresh `queued` rows, and reads. */
export function createTaskStore(db: Db): TaskStore {
  return {
    async insertQueued(row) {
      const out = await db.insert(tasks).values(row).onConflictDoNothing({ target: tasks.id }).returning();
      return out[0];
    },
    async get(id) {
      const read = async () => (await db.select().from(tasks).where(eq(tasks.id, id)).limit(1))[0];
      // A read is safe to repeat: after a Postgres restart the pool's first use of a dead
      // connection fails; the retry gets a fresh one.
      return read().catch(async (err) => {
        if (!isConnectionError(err)) throw err;
        await Bun.sleep(100);
        return read();
      });
    },
    async deleteUnpublished(id) {
      await db.delete(tasks).where(and(eq(tasks.id, id), eq(tasks.state, "queued"), eq(tasks.version, 0)));
    },
    async cancel(id, owner) {
      const out = await db
        .update(tasks)
        .set({ state: "cancelled", version: sql`${tasks.version} + 1`, leaseOwner: null, leaseUntil: null, completedAt: sql`now()`, updatedAt: sql`now()` })
        .where(and(eq(tasks.id, id), eq(tasks.owner, owner), inArray(tasks.state, ["queued", "retrying", "solving"])))
        .returning();
      return out[0];
    },
    async redrive(id, owner, deadlineMs) {
      const out = await db
        .update(tasks)
        .set({
          state: "queued",
          version: sql`${tasks.version} + 1`,
          attempts: 0,
          redrives: sql`${tasks.redrives} + 1`,
          providerId: null,
          deadlineAt: sql`now() + ${`${deadlineMs} milliseconds`}::interval`,
          completedAt: null,
          updatedAt: sql`now()`,
        })
        .where(and(eq(tasks.id, id), eq(tasks.owner, owner), eq(tasks.state, "failed")))
        .returning();
      return out[0];
    },
    async undoRedrive(row) {
      await db
        .update(tasks)
        .set({ state: "failed", version: sql`${tasks.version} + 1`, completedAt: sql`now()`, updatedAt: sql`now()` })
        .where(and(eq(tasks.id, row.id), eq(tasks.state, "queued"), eq(tasks.version, row.version)));
    },
    async ping() {
      await db.execute(sql`select 1`);
    },
  };
}
