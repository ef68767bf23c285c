import type { TaskRow } from "../db/schema/tasks.ts";
import type { TaskState, TaskView } from "../schemas/task.ts";
import type { Priority, TaskType } from "../schemas/task-types.ts";

/**
 * What a client sees of a row at `now`: a completed task whose token has expired is `expired`
 * and carries no token; it is never handed out as valid.
 */
export function toTaskView(row: TaskRow, now: Date): TaskView {
  const state = row.state as TaskState;
  const expired = state === "completed" && row.tokenExpiresAt !== null && row.tokenExpiresAt.getTime() <= now.getTime();
  const view: TaskView = {
    id: row.id,
    type: row.type as TaskType,
    priority: row.priority as Priority,
    status: expired ? "expired" : state,
    attempts: row.attempts,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    completedAt: row.completedAt?.toISOString() ?? null,
  };
  if (state === "completed" && !expired && row.token !== null) {
    view.result = { token: row.token, expiresAt: row.tokenExpiresAt?.toISOString() ?? null };
    if (row.userAgent) view.result.userAgent = row.userAgent;
  }
  if (expired) view.error = { code: "TOKEN_EXPIRED", message: "the token outlived its validity and is no longer handed out" };
  if (state === "failed" && row.errorCode) view.error = { code: row.errorCode, ...(row.errorMessage ? { message: row.errorMessage } : {}) };
  return view;
}

export const WAITABLE_DONE: readonly TaskState[] = ["completed", "failed", "cancelled"];
