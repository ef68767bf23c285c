import type { Context } from "hono";
import type { GatewayDeps } from "../../deps.ts";
import { toTaskView } from "../../domain/task-view.ts";
import { cancelTask } from "../../tasks/cancel.ts";
import type { GatewayEnvVars } from "../env.ts";
import { homeOnly, ownTask } from "./own-task.ts";
import { cancelProblem } from "./problems.ts";

/** `DELETE /v1/tasks/:id`: cancels an unfinished task of this client, in its home region. */
export function cancelRoute(deps: GatewayDeps) {
  return async (c: Context<GatewayEnvVars, "/:id">) => {
    const clientId = c.get("clientId");
    const row = homeOnly(deps, await ownTask(deps, clientId, c.req.param("id")));
    try {
      return c.json(toTaskView(await cancelTask(deps, clientId, row), deps.now()));
    } catch (err) {
      throw cancelProblem(err);
    }
  };
}
