import { Hono } from "hono";
import { z } from "zod";
import { fieldErrors, taskRequest } from "@pipeline/shared/schemas";
import { bearerToken } from "../domain/api-keys.ts";
import { validIdempotencyKey } from "../domain/task-id.ts";
import { SubmitError, submitTask } from "../usecases/submit-task.ts";
import { toTaskView, WAITABLE_DONE } from "../domain/task-view.ts";
import type { GatewayDeps, GatewayEnvVars } from "./deps.ts";
import { ProblemError } from "./problem.ts";
import type { TaskState } from "@pipeline/shared/schemas";

const TaskIdParam = z.uuid();

/** `/v1/tasks`: submit and read tasks of the calling client. */
export function tasksRoutes(deps: GatewayDeps) {
  const app = new Hono<GatewayEnvVars>();
  const schema = taskRequest({ imageMaxBytes: deps.config.IMAGE_MAX_BYTES });
  const now = deps.now ?? (() => new Date());
  const WaitQuery = z.coerce.number().int().min(0).max(deps.config.MAX_WAIT_SECONDS).default(0);

  app.use("*", async (c, next) => {
    const key = bearerToken(c.req.header("authorization"));
    const clientId = key === undefined ? undefined : deps.apiKeys.clientOf(key);
    if (!clientId)
      throw new ProblemError(401, "Unauthorized", key === undefined ? "send Authorization: Bearer <api key>" : "unknown API key", [{ field: "header.authorization", message: "missing or unknown API key" }], {
        "www-authenticate": 'Bearer realm="captcha-pipeline"',
      });
    c.set("clientId", clientId);
    await next();
  });

  app.post("/", async (c) => {
    const clientId = c.get("clientId");
    const ct = c.req.header("content-type") ?? "";
    if (!/^application\/json\b/i.test(ct)) throw new ProblemError(415, "Unsupported Media Type", "send the task as application/json", [{ field: "header.content-type", message: "must be application/json" }]);
    const idem = c.req.header("idempotency-key");
    if (idem !== undefined && !validIdempotencyKey(idem))
      throw new ProblemError(400, "Invalid Idempotency-Key", undefined, [{ field: "header.idempotency-key", message: "must be 1-255 visible ASCII characters" }]);
    let raw: unknown;
    try {
      raw = await c.req.json();
    } catch {
      throw new ProblemError(400, "Malformed JSON", "the body is not valid JSON", [{ field: "(body)", message: "not valid JSON" }]);
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) throw new ProblemError(400, "Invalid Task", "the task does not match the schema", fieldErrors(parsed.error));
    try {
      const r = await submitTask({ store: deps.store, queue: deps.queue, log: deps.log, region: deps.config.REGION, now }, clientId, parsed.data, idem);
      const headers: Record<string, string> = { location: `/v1/tasks/${r.id}` };
      if (r.replayed) headers["idempotent-replayed"] = "true";
      return c.json({ id: r.id, status: r.status }, 202, headers);
    } catch (err) {
      throw submitProblem(err);
    }
  });

  app.get("/:id", async (c) => {
    const clientId = c.get("clientId");
    const id = TaskIdParam.safeParse(c.req.param("id"));
    if (!id.success) throw new ProblemError(404, "Task Not Found", undefined, [{ field: "path.id", message: "not a task id" }]);
    const wait = WaitQuery.safeParse(c.req.query("wait") ?? undefined);
    if (!wait.success) throw new ProblemError(400, "Invalid Query", undefined, fieldErrors(wait.error, "query.wait"));
    const until = Date.now() + wait.data * 1000;
    for (;;) {
      const row = await deps.store.get(id.data);
      if (!row || row.owner !== clientId) throw new ProblemError(404, "Task Not Found", `no task ${id.data} for this API key`);
      const left = until - Date.now();
      if (WAITABLE_DONE.includes(row.state as TaskState) || left <= 0) return c.json(toTaskView(row, now()));
      await deps.watcher.waitForChange(id.data, Math.min(left, 1000));
    }
  });

  return app;
}

/** Maps a SubmitError onto problem+json. */
function submitProblem(err: unknown): unknown {
  if (!(err instanceof SubmitError)) return err;
  switch (err.code) {
    case "idempotency_mismatch":
      return new ProblemError(422, "Idempotency Key Reused", err.message, [{ field: "header.idempotency-key", message: "already used with a different request body" }]);
    case "id_collision":
      return new ProblemError(409, "Conflict", err.message);
    case "queue_unavailable":
      return new ProblemError(503, "Queue Unavailable", err.message, undefined, { "retry-after": "1" });
  }
}
