import type { TaskRow } from "../db/schema/tasks.ts";
import type { TaskView } from "../schemas/task.ts";

/**
 * What a client sees of a row at `now`: a completed task whose token has expired is `expired`
 * and carries no token; it is never handed out as valid. A completed row without a token is
 * `expired` as well (`TOKEN_UNAVAILABLE`): retention erased it (docs/security.md), or the row was
 * rebuilt from events, which say a token exists but never carry it (a restore, the other
 * region's replica whose home did not answer for it: apps/gateway/src/adapters/home-tokens.ts).
 * The client solves the task again, as for an expired token.
 */
export function toTaskView(row: TaskRow, now: Date): TaskView {
  const state = row.state;
  const pastExpiry =
    state === "completed" && row.tokenExpiresAt !== null && row.tokenExpiresAt.getTime() <= now.getTime();
  const unavailable = state === "completed" && !pastExpiry && row.token === null;
  const expired = pastExpiry || unavailable;
  const view: TaskView = {
    id: row.id,
    type: row.type,
    priority: row.priority,
    status: expired ? "expired" : state,
    attempts: row.attempts,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    completedAt: row.completedAt?.toISOString() ?? null,
  };
  // A scheduled task (docs/scheduling.md): what the client asked, and when it starts.
  if (row.notBefore) view.notBefore = row.notBefore.toISOString();
  if (row.needBy) view.needBy = row.needBy.toISOString();
  if (row.startAt) view.startAt = row.startAt.toISOString();
  if (state === "completed" && !expired && row.token !== null) {
    view.result = { token: row.token, expiresAt: row.tokenExpiresAt?.toISOString() ?? null };
    if (row.userAgent) view.result.userAgent = row.userAgent;
  }
  if (pastExpiry)
    view.error = { code: "TOKEN_EXPIRED", message: "the token outlived its validity and is no longer handed out" };
  if (unavailable)
    view.error = {
      code: "TOKEN_UNAVAILABLE",
      message:
        "the token is not held here (erased after its validity, or not carried by a restore or replica); solve the task again",
    };
  if (state === "failed" && row.errorCode)
    view.error = { code: row.errorCode, ...(row.errorMessage ? { message: row.errorMessage } : {}) };
  return view;
}
