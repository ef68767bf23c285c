import type { Context } from "hono";
import { createAuthThrottle, type AuthThrottle } from "../domain/auth-throttle.ts";
import { bearerToken } from "../domain/api-keys.ts";
import type { GatewayDeps } from "../deps.ts";
import { ProblemError } from "./problem.ts";

export type AuthResult = { ok: true; clientId: string } | { ok: false; reason: "missing" } | { ok: false; reason: "unknown" } | { ok: false; reason: "throttled"; retryAfter: number };

/**
 * API key authentication shared by the REST routes and the 2Captcha facade, with failed
 * attempts throttled per source address (issue 14.8). The source is the peer address of the
 * connection (Bun's `requestIP`), or with `GATEWAY_TRUST_PROXY` the last `X-Forwarded-For`
 * entry (the one the load balancer appended; earlier entries are the client's to forge).
 */
export interface Authenticator {
  check(c: Context, key: string | undefined): AuthResult;
  /** REST: the client id of the bearer key, or a 401 / 429 problem. */
  bearer(c: Context): string;
  throttle: AuthThrottle;
}

/** The address a request came from, or "unknown" (a request made in-process, as in tests without a server). */
export function sourceOf(c: Context, trustProxy: boolean): string {
  if (trustProxy) {
    const fwd = c.req.header("x-forwarded-for");
    const last = fwd?.split(",").pop()?.trim();
    if (last) return last;
  }
  const server = c.env as { requestIP?: (r: Request) => { address: string } | null } | undefined;
  try {
    return server?.requestIP?.(c.req.raw)?.address ?? "unknown";
  } catch {
    return "unknown";
  }
}

export function createAuthenticator(deps: Pick<GatewayDeps, "apiKeys" | "log" | "config" | "metrics">): Authenticator {
  const throttle = createAuthThrottle({ maxFailures: deps.config.AUTH_FAIL_MAX ?? 20, windowMs: deps.config.AUTH_FAIL_WINDOW_MS ?? 60_000 });
  const trustProxy = deps.config.GATEWAY_TRUST_PROXY ?? false;
  const check = (c: Context, key: string | undefined): AuthResult => {
    if (key === undefined || key === "") return { ok: false, reason: "missing" };
    // The source address is looked up (a getpeername(2) per request) only while some source has
    // failed recently, or when this key fails: a gateway nobody guesses keys at never asks.
    let source = throttle.active() ? sourceOf(c, trustProxy) : undefined;
    const wait = source === undefined ? undefined : throttle.blocked(source);
    if (wait !== undefined) {
      deps.metrics?.authFailure("throttled");
      return { ok: false, reason: "throttled", retryAfter: wait };
    }
    const clientId = deps.apiKeys.clientOf(key);
    if (clientId) return { ok: true, clientId };
    deps.metrics?.authFailure("unknown_key");
    source ??= sourceOf(c, trustProxy);
    const now = throttle.failed(source);
    // The source, never the key (not even a prefix of it).
    if (now !== undefined) deps.log.warn({ source, retryAfterSeconds: now }, "failed authentications throttled");
    return { ok: false, reason: "unknown" };
  };
  return {
    throttle,
    check,
    bearer(c) {
      const key = bearerToken(c.req.header("authorization"));
      const r = check(c, key);
      if (r.ok) return r.clientId;
      if (r.reason === "throttled")
        throw new ProblemError(429, "Too Many Failed Authentications", "too many unknown API keys from this address; retry later", [{ field: "header.authorization", message: "too many failed authentications" }], {
          "retry-after": String(r.retryAfter),
        });
      throw new ProblemError(401, "Unauthorized", r.reason === "missing" ? "send Authorization: Bearer <api key>" : "unknown API key", [{ field: "header.authorization", message: "missing or unknown API key" }], {
        "www-authenticate": 'Bearer realm="captcha-pipeline"',
      });
    },
  };
}
