import type { TaskRow } from "@pipeline/shared/db";
import { redriveFailedTask } from "@pipeline/shared/tasks";
import type { GatewayDeps } from "../deps.ts";
import { isRefusal, type QuotaRefusal, type Quotas } from "../domain/quotas.ts";

/** Why a redrive was refused; the task is left as it was. */
export class RedriveError extends Error {
  override name = "RedriveError";
  constructor(
    /** `params_erased`: retention emptied its params; `not_failed`: only a failed (dead-lettered) task is redriven; `quota`: see `refusal`; `queue_unavailable`: the message was not published (retry). */
    readonly code: "params_erased" | "not_failed" | "quota" | "queue_unavailable",
    /** The task's state when the redrive was asked for. */
    readonly state: string,
    /** With code "quota": which limit, and how to answer it. */
    readonly refusal?: QuotaRefusal,
  ) {
    super(code === "quota" && refusal ? refusal.message : code);
  }
}

export type RedriveDeps = Pick<GatewayDeps, "store" | "queue" | "log" | "fairShare"> & {
  config: Pick<GatewayDeps["config"], "REGION" | "TASK_DEADLINE_MS">;
  /** Per API key quotas (issue 14.6); absent: none. */
  quotas?: Pick<Quotas, "admitRedrive">;
};

/**
 * Requeues `row`, a failed task of `clientId` homed in this region, with a fresh deadline: the
 * quotas admit it (a redrive counts in flight and costs a solve), the row goes back to queued,
 * then the message is published under a new message id. A failed publish puts the row back as it
 * was and releases the quota (`queue_unavailable`); the `redriven` event's failure is only logged.
 */
export async function redriveTask(
  deps: RedriveDeps,
  clientId: string,
  row: TaskRow,
): Promise<{ id: string; status: "queued" }> {
  // Retention erased its params (TASK_RETENTION_DAYS, docs/security.md): nothing is left to solve.
  if (
    row.state === "failed" &&
    row.params !== null &&
    typeof row.params === "object" &&
    Object.keys(row.params).length === 0
  )
    throw new RedriveError("params_erased", row.state);
  if (row.state !== "failed") throw new RedriveError("not_failed", row.state);
  const admitted = deps.quotas
    ? await deps.quotas.admitRedrive(clientId, { type: row.type, redrives: row.redrives })
    : undefined;
  if (admitted && isRefusal(admitted)) throw new RedriveError("quota", row.state, admitted);
  // The shared core (@pipeline/shared/tasks): requeue, publish under a new message id, undo on failure, event.
  const r = await redriveFailedTask(
    {
      requeue: () => deps.store.redrive(row.id, clientId, deps.config.TASK_DEADLINE_MS),
      publishTask: (msg, msgID) => deps.queue.publishTask(msg, msgID),
      // On the owner's fair-share group's subjects, as the submit put it.
      ...(deps.fairShare ? { groupOf: (c: string) => deps.fairShare?.groupOf(c) } : {}),
      undo: async (redriven) => {
        admitted?.release();
        await deps.store.undoRedrive(redriven);
      },
      publishEvent: (ev) =>
        deps.queue
          .publishEvent(ev)
          .catch((err) =>
            deps.log.warn({ taskId: row.id, err: (err as Error).message }, "redriven event not published"),
          ),
    },
    deps.config.REGION,
  );
  if (!r.ok) {
    if (r.code === "not_failed") admitted?.release();
    throw new RedriveError(r.code, row.state);
  }
  return { id: row.id, status: "queued" };
}
