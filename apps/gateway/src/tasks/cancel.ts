import type { TaskRow } from "@pipeline/shared/db";
import type { TaskMessage } from "@pipeline/shared/schemas";
import { cancelledEvent } from "@pipeline/shared/tasks";
import type { GatewayDeps } from "../deps.ts";

/** Why a cancel changed nothing; `state` is the task's state now. */
export class CancelError extends Error {
  override name = "CancelError";
  constructor(
    readonly code: "already_final",
    readonly state: string,
  ) {
    super(`the task is ${state}; only unfinished tasks can be cancelled`);
  }
}

export type CancelDeps = Pick<GatewayDeps, "store" | "queue" | "log" | "now"> & {
  config: Pick<GatewayDeps["config"], "REGION">;
};

/**
 * Cancels `row`, a task of `clientId` homed in this region: the row first (only an unfinished
 * task), then the `cancelled` event (a failure is logged; the row is what counts); a scheduled task
 * not yet started loses its held message on TASKS too (unscheduleTask; a failure is logged, the
 * solver acks the held message when it fires, the row being final). Cancelling a
 * cancelled task answers it again; any other final task is an `already_final` CancelError.
 * Resolves to the task as it is now.
 */
export async function cancelTask(deps: CancelDeps, clientId: string, row: TaskRow): Promise<TaskRow> {
  const cancelled = await deps.store.cancel(row.id, clientId);
  if (!cancelled) {
    const current = (await deps.store.get(row.id)) ?? row;
    if (current.state === "cancelled") return current;
    throw new CancelError("already_final", current.state);
  }
  const held = cancelled.startAt && cancelled.startAt.getTime() > deps.now().getTime();
  const unscheduled = held
    ? deps.queue
        .unschedule({
          id: cancelled.id,
          type: cancelled.type as TaskMessage["type"],
          priority: cancelled.priority as TaskMessage["priority"],
        })
        .catch((err) =>
          deps.log.warn({ taskId: row.id, err: (err as Error).message }, "held message not removed on cancel"),
        )
    : undefined;
  await deps.queue
    // The shared event (@pipeline/shared/tasks): data.callback puts it on the hook subject for a task with a callback URL.
    .publishEvent(cancelledEvent(cancelled, deps.config.REGION))
    .catch((err) => deps.log.warn({ taskId: row.id, err: (err as Error).message }, "cancelled event not published"));
  await unscheduled;
  return cancelled;
}
