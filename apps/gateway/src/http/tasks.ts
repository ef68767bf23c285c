import { Hono } from "hono";
import { z } from "zod";
import { fieldErrors, taskRequest, type TaskRequest } from "@pipeline/shared/schemas";
import { bearerToken } from "../domain/api-keys.ts";
import { deriveTaskId, requestHash, validIdempotencyKey } from "../domain/task-id.ts";
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
    const req: TaskRequest = parsed.data;
    const id = deriveTaskId(clientId, idem);
    const hash = requestHash(req);
    const inserted = await deps.store.insertQueued({
      id,
      owner: clientId,
      idempotencyKey: idem ?? null,
      requestHash: hash,
      region: deps.config.REGION,
      type: req.type,
      priority: req.priority,
      params: req.params,
      state: "queued",
    });
    if (!inserted) {
      const existing = await deps.store.get(id);
      if (!existing || existing.owner !== clientId) throw new ProblemError(409, "Conflict", "task id collision; retry");
      if (existing.requestHash !== hash)
        throw new ProblemError(422, "Idempotency Key Reused", "this Idempotency-Key was used with another body", [{ field: "header.idempotency-key", message: "already used with a different request body" }]);
      // The first attempt may have died between insert and publish: publishing again is free (same Nats-Msg-Id).
      if (existing.state === "queued") await deps.queue.publishTask({ id, type: req.type, priority: req.priority });
      return c.json({ id, status: toTaskView(existing, now()).status }, 202, { "idempotent-replayed": "true", location: `/v1/tasks/${id}` });
    }
    try {
      await deps.queue.publishTask({ id, type: req.type, priority: req.priority });
    } catch (err) {
      await deps.store.deleteUnpublished(id).catch(() => {});
      deps.log.warn({ taskId: id, err: (err as Error).message }, "publish failed; task not accepted");
      throw new ProblemError(503, "Queue Unavailable", "the task was not accepted; retry (with the same Idempotency-Key)", undefined, { "retry-after": "1" });
    }
    deps.queue
      .publishEvent({
        taskId: id,
        kind: "accepted",
        state: "queued",
        version: 0,
        region: deps.config.REGION,
        at: inserted.createdAt.toISOString(),
        data: { owner: clientId, type: req.type, priority: req.priority, params: req.params, requestHash: hash, idempotencyKey: idem ?? null },
      })
      .catch((err) => deps.log.warn({ taskId: id, err: (err as Error).message }, "accepted event not published"));
    deps.log.debug({ taskId: id, type: req.type }, "task accepted");
    return c.json({ id, status: "queued" as const }, 202, { location: `/v1/tasks/${id}` });
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
