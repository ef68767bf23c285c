// A dead-lettered task's redrive, the part the gateway (`POST /v1/tasks/:id/retry`) and the
// recovery console share: failed -> queued, then a message with a fresh id (`<id>:redrive:<n>`:
// the first may still be in the duplicate window), the row put back to failed when the publish
// fails, then the `redriven` event. Who may redrive what, the SQL, and how a refusal is rendered
// stay with each caller (its ports and its result).

import { type GroupOf, requeueMessage } from "../fair-share/message.ts";
import type { TaskEvent, TaskMessage } from "../schemas/task.ts";

/** The row as the requeue left it. */
export interface RequeuedRow {
  id: string;
  type: string;
  priority: string;
  /** The client id: its fair-share group decides the message's subjects. */
  owner: string;
  version: number;
  redrives: number;
  deadlineAt: Date | null;
}

export interface RedrivePorts<R extends RequeuedRow> {
  /** failed -> queued with a fresh deadline and attempt count, in one guarded UPDATE; undefined when the row is not failed (or not the caller's). */
  requeue(): Promise<R | undefined>;
  /** Publishes the task message (publishTaskMessage) with Nats-Msg-Id `msgID`; throws when the queue does not take it. */
  publishTask(msg: TaskMessage, msgID: string): Promise<unknown>;
  /** Puts a requeued row back to failed (guarded by its version): its message was not published. */
  undo(row: R): Promise<void>;
  /** Publishes the `redriven` event; never throws (the caller logs or drops its failure). */
  publishEvent(ev: TaskEvent): Promise<void>;
  /** The fair-share groups in use: the message goes on the owner's group's subjects (absent: the lane's own). */
  groupOf?: GroupOf;
}

export type Redriven<R> =
  | { ok: true; row: R; deadlineAt: string | null }
  | { ok: false; code: "not_failed" | "queue_unavailable" };

/**
 * Redrives a failed task: requeued, its message published, the `redriven` event published
 * (`data`: redrives, deadlineAt, then `eventData`). A publish that fails leaves the task failed
 * (`queue_unavailable`); a row that is not failed is left as it is (`not_failed`).
 */
export async function redriveFailedTask<R extends RequeuedRow>(
  p: RedrivePorts<R>,
  region: string,
  eventData: Record<string, unknown> = {},
): Promise<Redriven<R>> {
  const row = await p.requeue();
  if (!row) return { ok: false, code: "not_failed" };
  try {
    await p.publishTask(requeueMessage(row, p.groupOf), `${row.id}:redrive:${row.redrives}`);
  } catch {
    await p.undo(row);
    return { ok: false, code: "queue_unavailable" };
  }
  const deadlineAt = row.deadlineAt ? new Date(row.deadlineAt).toISOString() : null;
  await p.publishEvent({
    taskId: row.id,
    kind: "redriven",
    state: "queued",
    version: row.version,
    region,
    at: new Date().toISOString(),
    data: { redrives: row.redrives, deadlineAt, ...eventData },
  });
  return { ok: true, row, deadlineAt };
}
