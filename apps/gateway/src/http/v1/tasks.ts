import { Hono } from "hono";
import { z } from "zod";
import { fieldErrors, taskRequest } from "@pipeline/shared/schemas";
import type { Authenticator } from "./auth.ts";
import { createQuotas, isRefusal, type QuotaRefusal } from "../domain/quotas.ts";
import { validIdempotencyKey } from "../domain/task-id.ts";
import { createWaitLimits } from "../domain/wait-limits.ts";
import { SubmitError, submitTask } from "../usecases/submit-task.ts";
import { toTaskView, WAITABLE_DONE } from "../domain/task-view.ts";
import type { GatewayDeps, GatewayEnvVars } from "./deps.ts";
import { ProblemError } from "./problem.ts";
import type { Priority, TaskState, TaskType } from "@pipeline/shared/schemas";
import { streamSSE } from "hono/streaming";

const TaskIdParam = z.uuid();

/** `/v1/tasks`: submit and read tasks of the calling client. */
export function tasksRoutes(deps: GatewayDeps, auth: Authenticator) {
  const app = new Hono<GatewayEnvVars>();
  // callbackUrl is checked against the SSRF policy here (a refusal is a 400 naming callbackUrl,
  // nothing stored) and again by the solver when it sends, after resolving the host.
  const schema = taskRequest({
    imageMaxBytes: deps.config.IMAGE_MAX_BYTES,
    callbacks: { allowHttp: deps.config.WEBHOOK_ALLOW_HTTP ?? false, allowPrivate: deps.config.WEBHOOK_ALLOW_PRIVATE ?? false },
  });
  const now = deps.now ?? (() => new Date());
  const WaitQuery = z.coerce.number().int().min(0).max(deps.config.MAX_WAIT_SECONDS).default(0);
  const limits = createWaitLimits({ perKey: deps.config.LONG_POLL_MAX_PER_KEY ?? 2000, total: deps.config.LONG_POLL_MAX_TOTAL ?? 20_000 });
  /** A waiting request re-reads its task at each event and at least this often (sooner for another region's task, whose events this gateway does not see). */
  const recheckMs = (region: string) => (region === deps.config.REGION ? (deps.config.LONG_POLL_RECHECK_MS ?? 5000) : 1000);
  const sseMaxMs = (deps.config.SSE_MAX_SECONDS ?? 300) * 1000;
  /** A slot for a waiting request, or a 429 naming what is capped. */
  const waitSlot = (clientId: string, field: string) => {
    const release = limits.enter(clientId);
    if (!release) {
      throw new ProblemError(429, "Too Many Waiting Requests", "this API key (or the gateway) holds as many long-polls and event streams as allowed; retry shortly or poll without ?wait", [{ field, message: "too many waiting requests" }], { "retry-after": "1" });
    }
    return release;
  };

  app.use("*", async (c, next) => {
    // Views carry tokens: no cache (a proxy's or the browser's) keeps one (issue 14, low).
    c.header("cache-control", "no-store");
    c.set("clientId", auth.bearer(c));
    await next();
  });

  app.post("/", async (c) => {
    const clientId = c.get("clientId");
    // A fenced region (cut off from the witness, or its lease taken over) would only queue the
    // task until it is back: the client is told to go to another region now.
    if (deps.fence && !deps.fence.allows()) {
      const others = (deps.config.regions ?? []).filter((r) => r !== deps.config.REGION);
      throw new ProblemError(503, "Region Fenced", `region ${deps.config.REGION} does not hold its lease; submit to ${others.join(" or ") || "another region"} with the same Idempotency-Key`, undefined, {
        "retry-after": "1",
        ...(others.length ? { "x-try-regions": others.join(",") } : {}),
      });
    }
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
      const r = await submitTask({ store: deps.store, queue: deps.queue, log: deps.log, region: deps.config.REGION, regions: deps.config.regions, deadlineMs: deps.config.TASK_DEADLINE_MS, now, ...(deps.quotas ? { quotas: deps.quotas } : {}) }, clientId, parsed.data, idem);
      deps.metrics?.submitted(parsed.data.type, r.replayed ? "replayed" : "accepted");
      const headers: Record<string, string> = { location: `/v1/tasks/${r.id}` };
      if (r.replayed) headers["idempotent-replayed"] = "true";
      return c.json({ id: r.id, status: r.status }, 202, headers);
    } catch (err) {
      if (err instanceof SubmitError && err.refusal) deps.metrics?.quotaRefused(err.refusal.kind);
      throw submitProblem(err);
    }
  });

  /** The task of this client named by the path, or a 404 problem. */
  const ownTask = async (clientId: string, raw: string) => {
    const id = TaskIdParam.safeParse(raw);
    if (!id.success) throw new ProblemError(404, "Task Not Found", undefined, [{ field: "path.id", message: "not a task id" }]);
    const row = await deps.store.get(id.data);
    if (!row || row.owner !== clientId) throw new ProblemError(404, "Task Not Found", `no task ${id.data} for this API key`);
    return row;
  };

  app.get("/:id", async (c) => {
    const clientId = c.get("clientId");
    const wait = WaitQuery.safeParse(c.req.query("wait") ?? undefined);
    if (!wait.success) throw new ProblemError(400, "Invalid Query", undefined, fieldErrors(wait.error, "query.wait"));
    const first = await ownTask(clientId, c.req.param("id"));
    if (wait.data === 0 || WAITABLE_DONE.includes(first.state as TaskState)) return c.json(toTaskView(first, now()));
    const release = waitSlot(clientId, "query.wait");
    const watch = deps.watcher.watch(first.id);
    try {
      const until = Date.now() + wait.data * 1000;
      for (let row = first; ; row = await ownTask(clientId, first.id)) {
        const left = until - Date.now();
        if (WAITABLE_DONE.includes(row.state as TaskState) || left <= 0) return c.json(toTaskView(row, now()));
        // The client gone: stop reading the task for nobody.
        if ((await watch.wait(Math.min(left, recheckMs(row.region)), c.req.raw.signal)) === "aborted") return c.body(null, 499 as never);
      }
    } finally {
      watch.close();
      release();
    }
  });

  app.get("/:id/events", async (c) => {
    const clientId = c.get("clientId");
    const first = await ownTask(clientId, c.req.param("id"));
    const release = waitSlot(clientId, "path.id");
    const watch = deps.watcher.watch(first.id);
    const res = streamSSE(c, async (stream) => {
      const gone = new AbortController();
      stream.onAbort(() => gone.abort());
      const until = Date.now() + sseMaxMs;
      try {
        let last = "";
        let lastWrite = Date.now();
        for (let row = first; !stream.aborted && !stream.closed; row = (await deps.store.get(first.id)) ?? row) {
          const view = toTaskView(row, now());
          const key = `${row.version}:${view.status}`;
          if (key !== last) {
            await stream.writeSSE({ event: "state", id: String(row.version), data: JSON.stringify(view) });
            last = key;
            lastWrite = Date.now();
          }
          if (WAITABLE_DONE.includes(row.state as TaskState)) break;
          const left = until - Date.now();
          // A stream lives at most SSE_MAX_SECONDS: EventSource reconnects (Last-Event-ID) to a fresh one.
          if (left <= 0) break;
          if ((await watch.wait(Math.min(left, recheckMs(row.region), 15_000), gone.signal)) === "aborted") break;
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
  });

  /**
   * Reads are answered for tasks of every region (their rows replicate here); a change goes to
   * the task's home region, which owns its queue and its events.
   */
  const homeOnly = <R extends { region: string }>(row: R): R => {
    if (row.region !== deps.config.REGION) {
      throw new ProblemError(409, "Task Of Another Region", `the task lives in region ${row.region}; send this request to that region's gateway`, undefined, { "x-home-region": row.region });
    }
    return row;
  };

  app.delete("/:id", async (c) => {
    const clientId = c.get("clientId");
    const row = homeOnly(await ownTask(clientId, c.req.param("id")));
    const cancelled = await deps.store.cancel(row.id, clientId);
    if (!cancelled) {
      const current = (await deps.store.get(row.id)) ?? row;
      if (current.state === "cancelled") return c.json(toTaskView(current, now()));
      throw new ProblemError(409, "Task Already Final", `the task is ${current.state}; only unfinished tasks can be cancelled`);
    }
    await deps.queue
      .publishEvent({ taskId: row.id, kind: "cancelled", state: "cancelled", version: cancelled.version, region: deps.config.REGION, at: new Date().toISOString() })
      .catch((err) => deps.log.warn({ taskId: row.id, err: (err as Error).message }, "cancelled event not published"));
    return c.json(toTaskView(cancelled, now()));
  });

  app.post("/:id/retry", async (c) => {
    const clientId = c.get("clientId");
    const row = homeOnly(await ownTask(clientId, c.req.param("id")));
    // Retention erased its params (TASK_RETENTION_DAYS, docs/security.md): nothing is left to solve.
    if (row.state === "failed" && row.params !== null && typeof row.params === "object" && Object.keys(row.params).length === 0)
      throw new ProblemError(409, "Task Params Erased", "the task's params were erased by retention (TASK_RETENTION_DAYS); submit the task again", [{ field: "path.id", message: "params erased by retention" }]);
    if (row.state !== "failed") throw new ProblemError(409, "Task Not Failed", `the task is ${row.state}; only failed (dead-lettered) tasks can be retried`);
    // Quotas: redrives per task, and the redrive counts in flight and costs a solve (issue 14.6).
    const admitted = deps.quotas ? await deps.quotas.admitRedrive(clientId, { type: row.type, redrives: row.redrives }) : undefined;
    if (admitted && isRefusal(admitted)) {
      deps.metrics?.quotaRefused(admitted.kind);
      throw quotaProblem(admitted);
    }
    const redriven = await deps.store.redrive(row.id, clientId, deps.config.TASK_DEADLINE_MS);
    if (!redriven) {
      admitted?.release();
      throw new ProblemError(409, "Task Not Failed", `the task is ${row.state}; only failed (dead-lettered) tasks can be retried`);
    }
    try {
      // A new message id: the first one may still be inside the duplicate window.
      await deps.queue.publishTask({ id: row.id, type: row.type as TaskType, priority: row.priority as Priority }, `${row.id}:redrive:${redriven.redrives}`);
    } catch {
      admitted?.release();
      await deps.store.undoRedrive(redriven);
      throw new ProblemError(503, "Queue Unavailable", "the task was not requeued; retry", undefined, { "retry-after": "1" });
    }
    await deps.queue
      .publishEvent({ taskId: row.id, kind: "redriven", state: "queued", version: redriven.version, region: deps.config.REGION, at: new Date().toISOString(), data: { redrives: redriven.redrives, deadlineAt: redriven.deadlineAt?.toISOString() ?? null } })
      .catch((err) => deps.log.warn({ taskId: row.id, err: (err as Error).message }, "redriven event not published"));
    return c.json({ id: row.id, status: "queued" as const }, 202, { location: `/v1/tasks/${row.id}` });
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
    case "quota":
      return err.refusal ? quotaProblem(err.refusal) : new ProblemError(429, "Quota Exceeded", err.message);
  }
}

const QUOTA_TITLES: Record<QuotaRefusal["kind"], string> = {
  submitsPerSecond: "Submission Rate Limited",
  maxInFlight: "Too Many Tasks In Flight",
  dailySpend: "Daily Spend Limit Reached",
  highLane: "High Lane Not Allowed",
  maxRedrives: "Redrive Limit Reached",
};

/** A quota refusal as problem+json: 429 with Retry-After for a limit, 403 for a right; the quota named as the field. */
function quotaProblem(r: QuotaRefusal): ProblemError {
  return new ProblemError(r.status, QUOTA_TITLES[r.kind], r.message, [{ field: r.field, message: r.message }], r.retryAfter !== undefined ? { "retry-after": String(r.retryAfter) } : {});
}

/** `GET /v1/usage`: the calling key's own figures and limits, never another key's. */
export function usageRoutes(deps: GatewayDeps, auth: Authenticator) {
  const app = new Hono<GatewayEnvVars>();
  const none = createQuotas({ source: { openByOwner: async () => new Map(), createdSince: async (_o, from) => ({ settledTo: from, rows: [] }) } });
  app.get("/", async (c) => {
    const clientId = auth.bearer(c);
    c.header("cache-control", "no-store");
    return c.json(await (deps.quotas ?? none).usage(clientId));
  });
  return app;
}
