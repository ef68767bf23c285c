import { type TaskState, TERMINAL_STATES } from "@pipeline/shared/schemas";
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import { HomeUnreachableError } from "../../adapters/home-tokens.ts";
import type { GatewayDeps } from "../../deps.ts";
import { toTaskView } from "../../domain/task-view.ts";
import type { GatewayEnvVars } from "../env.ts";
import { ownTask } from "./own-task.ts";
import type { Waiting } from "./waiting.ts";

/** The task again; undefined while its result is held by a home region that does not answer (the stream waits on). */
const reread = (deps: GatewayDeps, id: string) =>
  (deps.results ?? deps.store).get(id).catch((err) => {
    if (err instanceof HomeUnreachableError) return undefined;
    throw err;
  });

/** `GET /v1/tasks/:id/events`: the task's states as server-sent events, until final or SSE_MAX_SECONDS. */
export function eventsRoute(deps: GatewayDeps, waiting: Waiting) {
  return async (c: Context<GatewayEnvVars, "/:id/events">) => {
    const clientId = c.get("clientId");
    const first = await ownTask({ store: deps.results ?? deps.store }, clientId, c.req.param("id"));
    const release = waiting.slot(clientId, "path.id");
    const watch = deps.watcher.watch(first.id);
    const res = streamSSE(c, async (stream) => {
      const gone = new AbortController();
      stream.onAbort(() => gone.abort());
      const until = Date.now() + waiting.sseMaxMs;
      try {
        let last = "";
        let lastWrite = Date.now();
        for (let row = first; !stream.aborted && !stream.closed; row = (await reread(deps, first.id)) ?? row) {
          const view = toTaskView(row, deps.now());
          const key = `${row.version}:${view.status}`;
          if (key !== last) {
            await stream.writeSSE({ event: "state", id: String(row.version), data: JSON.stringify(view) });
            last = key;
            lastWrite = Date.now();
          }
          if (TERMINAL_STATES.includes(row.state as TaskState)) break;
          const left = until - Date.now();
          // A stream lives at most SSE_MAX_SECONDS: EventSource reconnects (Last-Event-ID) to a fresh one.
          if (left <= 0) break;
          if ((await watch.wait(Math.min(left, waiting.recheckMs(row.region), 15_000), gone.signal)) === "aborted")
            break;
          if (Date.now() - lastWrite > 15_000) {
            await stream.write(": keep-alive\n\n");
            lastWrite = Date.now();
          }
        }
      } finally {
        watch.close();
        release();
      }
    });
    // streamSSE says no-cache; the events carry the token: no-store (issue 14, low).
    res.headers.set("cache-control", "no-store");
    return res;
  };
}
