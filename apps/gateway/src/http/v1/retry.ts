import type { Context } from "hono";
import type { GatewayDeps } from "../../deps.ts";
import { RedriveError, redriveTask } from "../../tasks/redrive.ts";
import type { GatewayEnvVars } from "../env.ts";
import { homeOnly, ownTask } from "./own-task.ts";
import { redriveProblem } from "./problems.ts";

/** `POST /v1/tasks/:id/retry`: requeues a failed (dead-lettered) task of this client, in its home region. */
export function retryRoute(deps: GatewayDeps) {
  return async (c: Context<GatewayEnvVars, "/:id/retry">) => {
    const clientId = c.get("clientId");
    const row = homeOnly(deps, await ownTask(deps, clientId, c.req.param("id")));
    try {
      const r = await redriveTask(deps, clientId, row);
      return c.json({ id: r.id, status: r.status }, 202, { location: `/v1/tasks/${r.id}` });
    } catch (err) {
      if (err instanceof RedriveError && err.refusal) deps.metrics?.quotaRefused(err.refusal.kind);
      throw redriveProblem(err);
    }
  };
}
