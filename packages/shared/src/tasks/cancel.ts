// A task's cancel, the part the gateway (`POST /v1/tasks/:id/cancel`) and the recovery console's
// bulk cancel share: the guarded UPDATE (only an unfinished task of that owner: queued, retrying or
// solving) and the `cancelled` event it is followed by. Publishing the event, and how a refusal is
// rendered, stay with each caller.
import { and, eq, inArray, sql } from "drizzle-orm";
import { type Db, type TaskRow, tasks } from "../db/index.ts";
import type { TaskEvent } from "../schemas/task.ts";

/** The states a cancel takes a task from. */
export const CANCELLABLE_STATES = ["queued", "retrying", "solving"] as const;

/** Cancels a task of `owner` that is not final; undefined when it is not theirs or already final. */
export async function cancelTaskRow(db: Db, id: string, owner: string): Promise<TaskRow | undefined> {
  const out = await db
    .update(tasks)
    .set({
      state: "cancelled",
      version: sql`${tasks.version} + 1`,
      leaseOwner: null,
      leaseUntil: null,
      completedAt: sql`now()`,
      updatedAt: sql`now()`,
    })
    .where(and(eq(tasks.id, id), eq(tasks.owner, owner), inArray(tasks.state, [...CANCELLABLE_STATES])))
    .returning();
  return out[0];
}

/**
 * The `cancelled` event of a row the cancel left; `data.callback`: a task with a callback URL has
 * its final event on the hook subject (the notifier's; subjectOfEvent).
 */
export function cancelledEvent(
  row: Pick<TaskRow, "id" | "version" | "callbackUrl">,
  region: string,
  at = new Date(),
): TaskEvent {
  return {
    taskId: row.id,
    kind: "cancelled",
    state: "cancelled",
    version: row.version,
    region,
    at: at.toISOString(),
    data: { callback: Boolean(row.callbackUrl) },
  };
}
