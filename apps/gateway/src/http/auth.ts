import { type Cidr, inAnyCidr } from "@pipeline/shared/net";
import type { Context } from "hono";
import type { GatewayDeps } from "../deps.ts";
import { bearerToken } from "../domain/api-keys.ts";
import { type AuthThrottle, createAuthThrottle } from "../domain/auth-throttle.ts";
import { ProblemError } from "./problem.ts";

export type AuthResult =
  | { ok: true; clientId: string }
  | { ok: false; reason: "missing" }
  | { ok: false; reason: "unknown" }
  | { ok: false; reason: "throttled"; retryAfter: number };

/**
 * API key authentication shared by the REST routes and the 2Captcha facade, with failed
 * attempts throttled per (source address, key) and per source address (auth-throttle.ts). The
 * source is the peer address of the connection (Bun's `requestIP`); when that peer is one of
 * `GATEWAY_TRUSTED_PROXIES` (the load balancer), the rightmost `X-Forwarded-For` entry that is not
 * itself a trusted proxy (entries further left are the client's to forge).
 */
export interface Authenticator {
  check(c: Context, key: string | undefined): AuthResult;
  /** REST: the client id of the bearer key, or a 401 / 429 problem. */
  bearer(c: Context): string;
  throttle: AuthThrottle;
}

function peerOf(c: Context): string | undefined {
  const server = c.env as { requestIP?: (r: Request) => { address: string } | null } | undefined;
  try {
    return server?.requestIP?.(c.req.raw)?.address ?? undefined;
  } catch {
    return undefined;
  }
}

/**
 * The address a request came from, or "unknown" (a request made in-process, as in tests without a
 * server). `X-Forwarded-For` is believed only from a trusted proxy, and only as far as the chain
 * runs through trusted proxies.
 */
export function sourceOf(c: Context, trustedProxies: readonly Cidr[]): string {
  const peer = peerOf(c);
  if (peer === undefined) return "unknown";
  if (trustedProxies.length === 0 || !inAnyCidr(peer, trustedProxies)) return peer;
  const hops = (c.req.header("x-forwarded-for") ?? "")
    .split(",")
    .map((h) => h.trim())
    .filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) if (!inAnyCidr(hops[i]!, trustedProxies)) return hops[i]!;
  return peer;
}

/**
 * Says once (a warning and a metric) that requests carry `X-Forwarded-For` from a peer that is not
 * a trusted proxy: a load balancer the gateway does not know, whose clients all share its address.
 */
function unknownProxyWatch(deps: Pick<GatewayDeps, "log">, trusted: readonly Cidr[]) {
  const seen = new Set<string>();
  return (c: Context) => {
    if (seen.size >= 16 || c.req.header("x-forwarded-for") === undefined) return;
    const peer = peerOf(c);
    if (peer === undefined || seen.has(peer) || inAnyCidr(peer, trusted)) return;
    seen.add(peer);
    deps.log.warn(
      { peer },
      "requests carry X-Forwarded-For from a peer that is not in GATEWAY_TRUSTED_PROXIES: every client behind it shares one address for the failed-login throttle (set GATEWAY_TRUSTED_PROXIES to the load balancer's address)",
    );
  };
}

export function createAuthenticator(deps: Pick<GatewayDeps, "apiKeys" | "log" | "config" | "metrics">): Authenticator {
  const throttle = createAuthThrottle({
    maxFailures: deps.config.AUTH_FAIL_MAX ?? 20,
    maxPerSource: deps.config.AUTH_FAIL_MAX_PER_SOURCE,
    windowMs: deps.config.AUTH_FAIL_WINDOW_MS ?? 60_000,
  });
  const trusted = deps.config.GATEWAY_TRUSTED_PROXIES ?? [];
  const watchUnknownProxy = unknownProxyWatch(deps, trusted);
  const check = (c: Context, key: string | undefined): AuthResult => {
    if (key === undefined || key === "") return { ok: false, reason: "missing" };
    // The source address is looked up (a getpeername(2) per request) only while some source has
    // failed recently, or when this key fails: a gateway nobody guesses keys at never asks.
    let source = throttle.active() ? sourceOf(c, trusted) : undefined;
    const wait = source === undefined ? undefined : throttle.blocked(source, key);
    if (wait !== undefined) {
      deps.metrics?.authFailure("throttled");
      return { ok: false, reason: "throttled", retryAfter: wait };
    }
    const clientId = deps.apiKeys.clientOf(key);
    if (clientId) return { ok: true, clientId };
    deps.metrics?.authFailure("unknown_key");
    source ??= sourceOf(c, trusted);
    watchUnknownProxy(c);
    const now = throttle.failed(source, key);
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
        throw new ProblemError(
          429,
          "Too Many Failed Authentications",
          "too many failed authentications of this key, or of any key from this address; retry later",
          [{ field: "header.authorization", message: "too many failed authentications" }],
          {
            "retry-after": String(r.retryAfter),
          },
        );
      throw new ProblemError(
        401,
        "Unauthorized",
        r.reason === "missing" ? "send Authorization: Bearer <api key>" : "unknown API key",
        [{ field: "header.authorization", message: "missing or unknown API key" }],
        {
          "www-authenticate": 'Bearer realm="captcha-pipeline"',
        },
      );
    },
  };
}
