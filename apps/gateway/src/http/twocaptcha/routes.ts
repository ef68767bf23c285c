import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { TaskView } from "@pipeline/shared/schemas";
import { toTaskView } from "../domain/task-view.ts";
import type { Authenticator, AuthResult } from "../http/auth.ts";
import type { GatewayDeps, GatewayEnvVars } from "../http/deps.ts";
import { SubmitError, submitTask } from "../usecases/submit-task.ts";
import { code, ok, bare, renderReply, replyStyleOf, type ProtocolReply, type ReplyStyle } from "./domain/reply.ts";
import { FACADE_BALANCE, parseResRequest } from "./domain/res-request.ts";
import { parseSubmission, submitFailureCode } from "./domain/submission.ts";
import { bulkGetReply, get2Reply, getReply, reportReply } from "./domain/task-answer.ts";
import { readProtocolCall, type ProtocolCall } from "./request-params.ts";

type Ctx = Context<GatewayEnvVars>;

/** The reply style when the body could not be read: `json` from the query, or implied by a JSON body. */
function fallbackStyle(c: Ctx): ReplyStyle {
  const style = replyStyleOf(Object.fromEntries(new URL(c.req.url).searchParams));
  return { ...style, json: style.json || /^application\/json/i.test(c.req.header("content-type") ?? "") };
}

function send(c: Ctx, style: ReplyStyle, reply: ProtocolReply, status: 200 | 500 = 200): Response {
  const r = renderReply(style, reply);
  return c.body(r.body, status, r.headers);
}

/** The protocol's answer to a failed authentication. */
function refuse(c: Ctx, style: ReplyStyle, r: Exclude<AuthResult, { ok: true }>): Response {
  if (r.reason === "missing") return send(c, style, code("ERROR_KEY_DOES_NOT_EXIST"));
  if (r.reason === "unknown") return send(c, style, code("ERROR_WRONG_USER_KEY"));
  // 2Captcha's own answer to "too many wrong keys from this address"; clients back off on it.
  c.header("retry-after", String(r.retryAfter));
  return send(c, style, code("IP_BANNED"));
}

/**
 * The 2Captcha v1 protocol (`in.php`/`res.php`) over the pipeline's tasks, for unmodified
 * 2Captcha/CaptchaAI clients. Submissions go through `submitTask` (row + PubAck, as
 * `POST /v1/tasks`); answers are always protocol replies, never problem+json. Mounted at `/`.
 */
export function facadeRoutes(deps: GatewayDeps, auth: Authenticator) {
  const app = new Hono<GatewayEnvVars>();
  const now = deps.now ?? (() => new Date());
  const submitDeps = { store: deps.store, queue: deps.queue, log: deps.log, region: deps.config.REGION, regions: deps.config.regions, deadlineMs: deps.config.TASK_DEADLINE_MS, now, ...(deps.quotas ? { quotas: deps.quotas } : {}) };
  // Only the facade's paths get these limits: a middleware on "*" here would, mounted at "/", cover every route.
  const limit = (tooBig: string) =>
    bodyLimit({ maxSize: deps.config.MAX_BODY_BYTES, onError: (c) => send(c as Ctx, fallbackStyle(c as Ctx), code(tooBig)) });

  /** Reads the call, authenticates `key`, runs `fn`, and renders its reply in the caller's style. */
  const protocol = (fn: (call: ProtocolCall, clientId: string, c: Ctx) => Promise<ProtocolReply>) => async (c: Ctx) => {
    // A key in the query string is checked before the body is read: an unknown or throttled
    // caller's upload is never parsed (issue 14, low). A key only in the body is checked after.
    const queryKey = new URL(c.req.url).searchParams.get("key")?.trim();
    const early = queryKey ? auth.check(c, queryKey) : undefined;
    if (early && !early.ok) return refuse(c, fallbackStyle(c), early);
    const call = await readProtocolCall(c.req.raw);
    const style = call.malformed ? fallbackStyle(c) : replyStyleOf(call.params);
    if (call.malformed) return send(c, style, code("ERROR_BAD_PARAMETERS"));
    const key = call.params.key?.trim();
    const checked = early?.ok && key === queryKey ? early : auth.check(c, key);
    if (!checked.ok) return refuse(c, style, checked);
    const clientId = checked.clientId;
    try {
      return send(c, style, await fn(call, clientId, c));
    } catch (err) {
      const e = err as Error;
      deps.log.error({ requestId: c.get("requestId"), path: c.req.path, err: { name: e.name, message: e.message, stack: e.stack } }, "facade call failed");
      return send(c, style, code("ERROR_INTERNAL_SERVER_ERROR"), 500);
    }
  };

  /** The caller's view of a task, or undefined when it does not exist or belongs to another key. */
  const viewOf = async (id: string, clientId: string): Promise<TaskView | undefined> => {
    const row = await deps.store.get(id);
    return row && row.owner === clientId ? toTaskView(row, now()) : undefined;
  };

  app.on(
    ["GET", "POST"],
    "/in.php",
    limit("ERROR_TOO_BIG_CAPTCHA_FILESIZE"),
    protocol(async (call, clientId, c) => {
      const sub = parseSubmission(call.params, call.file, { imageMaxBytes: deps.config.IMAGE_MAX_BYTES });
      if (!sub.ok) return code(sub.code);
      // A fenced region (its lease lapsed or taken over) takes no new task: the protocol's "busy,
      // retry" code, which 2Captcha clients retry on; the other regions named as for REST.
      if (deps.fence && !deps.fence.allows()) {
        const others = (deps.config.regions ?? []).filter((r) => r !== deps.config.REGION);
        if (others.length) c.header("x-try-regions", others.join(","));
        return code("ERROR_NO_SLOT_AVAILABLE");
      }
      try {
        const accepted = await submitTask(submitDeps, clientId, sub.task, undefined);
        return ok(accepted.id);
      } catch (err) {
        if (err instanceof SubmitError) {
          if (err.refusal) {
            deps.metrics?.quotaRefused(err.refusal.kind);
            if (err.refusal.retryAfter !== undefined) c.header("retry-after", String(err.refusal.retryAfter));
            // The protocol's codes: no money left for today, or busy (clients retry).
            return code(err.refusal.kind === "dailySpend" ? "ERROR_ZERO_BALANCE" : "ERROR_NO_SLOT_AVAILABLE");
          }
          return code(submitFailureCode(err.code));
        }
        throw err;
      }
    }),
  );

  app.on(
    ["GET", "POST"],
    "/res.php",
    limit("ERROR_BAD_PARAMETERS"),
    protocol(async (call, clientId, c) => {
      const parsed = parseResRequest(call.params);
      if (!parsed.ok) return code(parsed.code);
      const r = parsed.request;
      switch (r.action) {
        case "getbalance":
          return bare(FACADE_BALANCE);
        case "get":
          if (!r.bulk) return getReply(await viewOf(r.ids[0]!, clientId));
          {
            // One query for all the ids (up to 100), not one each.
            const rows = new Map((await deps.store.getMany(r.ids)).map((row) => [row.id, row]));
            return bulkGetReply(r.ids.map((id) => {
              const row = rows.get(id);
              return row && row.owner === clientId ? toTaskView(row, now()) : undefined;
            }));
          }
        case "get2":
          return get2Reply(await viewOf(r.id, clientId));
        case "reportbad":
        case "reportgood": {
          const reply = reportReply(await viewOf(r.id, clientId));
          // Recorded in the log only: the gateway cannot reach the provider to forward it.
          if (reply.kind === "bare") deps.log.info({ requestId: c.get("requestId"), taskId: r.id, report: r.action === "reportbad" ? "bad" : "good" }, "facade report recorded");
          return reply;
        }
      }
    }),
  );

  return app;
}
