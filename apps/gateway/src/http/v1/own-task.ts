import type { TaskRow } from "@pipeline/shared/db";
import { z } from "zod";
import type { GatewayDeps } from "../../deps.ts";
import { ProblemError } from "../problem.ts";

const TaskIdParam = z.uuid();

/** The task of this client named by the path (owned by its id), or a 404 problem. */
export async function ownTask(
  deps: { store: Pick<GatewayDeps["store"], "get"> },
  clientId: string,
  raw: string,
): Promise<TaskRow> {
  const id = TaskIdParam.safeParse(raw);
  if (!id.success)
    throw new ProblemError(404, "Task Not Found", undefined, [{ field: "path.id", message: "not a task id" }]);
  const row = await deps.store.get(id.data);
  if (!row || row.owner !== clientId)
    throw new ProblemError(404, "Task Not Found", `no task ${id.data} for this API key`);
  return row;
}

/**
 * Reads are answered for tasks of every region (their rows replicate here); a change goes to
 * the task's home region, which owns its queue and its events: elsewhere, a 409 problem.
 */
export function homeOnly<R extends { region: string }>(deps: Pick<GatewayDeps, "config">, row: R): R {
  if (row.region !== deps.config.REGION) {
    throw new ProblemError(
      409,
      "Task Of Another Region",
      `the task lives in region ${row.region}; send this request to that region's gateway`,
      undefined,
      { "x-home-region": row.region },
    );
  }
  return row;
}
