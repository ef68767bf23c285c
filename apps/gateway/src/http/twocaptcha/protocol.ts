import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { GatewayDeps } from "../../deps.ts";
import { code, type ProtocolReply, type ReplyStyle, renderReply, replyStyleOf } from "../../domain/twocaptcha/reply.ts";
import type { Authenticator, AuthResult } from "../auth.ts";
import type { GatewayEnvVars } from "../env.ts";
import { type ProtocolCall, readProtocolCall } from "./request-params.ts";

export type Ctx = Context<GatewayEnvVars>;

/** What answers one in.php/res.php call of an authenticated client: a protocol reply. */
export type ProtocolAction = (call: ProtocolCall, clientId: string, c: Ctx) => Promise<ProtocolReply>;

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

/** A body limit of `MAX_BODY_BYTES` answering the protocol's `tooBig` code. */
export function protocolBodyLimit(deps: Pick<GatewayDeps, "config">, tooBig: string) {
  return bodyLimit({
    maxSize: deps.config.MAX_BODY_BYTES,
    onError: (c) => send(c as Ctx, fallbackStyle(c as Ctx), code(tooBig)),
  });
}

/** A handler that reads the call, authenticates `key`, runs `action`, and renders its reply in the caller's style. */
export function protocolHandler(deps: Pick<GatewayDeps, "log">, auth: Authenticator, action: ProtocolAction) {
  return async (c: Ctx) => {
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
      return send(c, style, await action(call, clientId, c));
    } catch (err) {
      const e = err as Error;
      deps.log.error(
        { requestId: c.get("requestId"), path: c.req.path, err: { name: e.name, message: e.message, stack: e.stack } },
        "facade call failed",
      );
      return send(c, style, code("ERROR_INTERNAL_SERVER_ERROR"), 500);
    }
  };
}
