import { fieldErrors, type TaskState, TERMINAL_STATES } from "@pipeline/shared/schemas";
import type { Context } from "hono";
import { z } from "zod";
import type { GatewayDeps } from "../../deps.ts";
import { toTaskView } from "../../domain/task-view.ts";
import type { GatewayEnvVars } from "../env.ts";
import { ProblemError } from "../problem.ts";
import { ownTask } from "./own-task.ts";
import type { Waiting } from "./waiting.ts";

/** `GET /v1/tasks/:id[?wait=N]`: the task, or with `wait` the task once final or after N seconds. */
export function readRoute(deps: GatewayDeps, waiting: Waiting) {
  const WaitQuery = z.coerce.number().int().min(0).max(deps.config.MAX_WAIT_SECONDS).default(0);
  return async (c: Context<GatewayEnvVars, "/:id">) => {
    const clientId = c.get("clientId");
    const wait = WaitQuery.safeParse(c.req.query("wait") ?? undefined);
    if (!wait.success) throw new ProblemError(400, "Invalid Query", undefined, fieldErrors(wait.error, "query.wait"));
    const reads = { store: deps.results ?? deps.store };
    const first = await ownTask(reads, clientId, c.req.param("id"));
    if (wait.data === 0 || TERMINAL_STATES.includes(first.state as TaskState))
      return c.json(toTaskView(first, deps.now()));
    const release = waiting.slot(clientId, "query.wait");
    // Only a final event can end the wait: the others do not wake it (each would be a re-read).
    const watch = deps.watcher.watch(first.id, { finalOnly: true });
    try {
      const until = Date.now() + wait.data * 1000;
      for (let row = first; ; row = await ownTask(reads, clientId, first.id)) {
        const left = until - Date.now();
        if (TERMINAL_STATES.includes(row.state as TaskState) || left <= 0) return c.json(toTaskView(row, deps.now()));
        // The client gone: stop reading the task for nobody.
        if ((await watch.wait(Math.min(left, waiting.recheckMs(row.region)), c.req.raw.signal)) === "aborted")
          return c.body(null, 499 as never);
      }
    } finally {
      watch.close();
      release();
    }
  };
}
