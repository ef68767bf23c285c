// The task message a row is queued again with (the reaper, the stale sweep, `recovery
// rebuild-queue`, a region's adoption, a redrive): on its owner's fair-share group's subjects, as
// the gateway put it at the submit. The row does not store the group: it is the owner's group in the
// record read now (a client moved between groups since is served with its new group).
import type { TaskMessage } from "../schemas/task.ts";
import type { Priority, TaskType } from "../schemas/task-types.ts";

/** A client id's group in the record in use (FairShareView.groupOf), or undefined (the lane's own subjects). */
export type GroupOf = (clientId: string) => string | undefined;

export interface RequeuedTask {
  id: string;
  type: string;
  priority: string;
  owner: string;
}

/** The task message for a row queued again; without `groupOf` (no record read) the lane's own subjects. */
export function requeueMessage(row: RequeuedTask, groupOf?: GroupOf): TaskMessage {
  const group = groupOf?.(row.owner);
  return { id: row.id, type: row.type as TaskType, priority: row.priority as Priority, ...(group ? { group } : {}) };
}
