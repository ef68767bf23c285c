import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { routePath } from "hono/route";
import type { GatewayDeps } from "../deps.ts";
import type { GatewayEnvVars } from "./env.ts";
import { ProblemError, problemResponse } from "./problem.ts";

/** A client's X-Request-Id is kept when it is a plain token of at most 255 characters (hono's requestId rule); otherwise a fresh UUID. */
export function requestIdOf(given: string | undefined): string {
  return given && given.length <= 255 && !/[^\w\-=]/.test(given) ? given : crypto.randomUUID();
}

/**
 * What every request of the clients' listener goes through, as one middleware: its request id
 * (`c.get("requestId")`, echoed as X-Request-Id), the body limit of `/v1/*`, then the duration
 * histogram and the request log line. One layer where hono's requestId, a timer and bodyLimit
 * were three (issue 13: each async layer is a promise and a frame per request; ~6 µs of CPU per
 * request less). A body that declares its length is judged by the header; one that does not
 * (chunked) is counted as it streams, by hono's bodyLimit.
 */
export function requestFrame(deps: Pick<GatewayDeps, "config" | "metrics" | "log">): MiddlewareHandler<GatewayEnvVars> {
  const maxSize = deps.config.MAX_BODY_BYTES;
  const tooLarge = () =>
    new ProblemError(413, "Payload Too Large", `the body exceeds ${maxSize} bytes`, [
      { field: "(body)", message: `at most ${maxSize} bytes` },
    ]);
  const streamed = bodyLimit({
    maxSize,
    onError: () => {
      throw tooLarge();
    },
  });
  /** Runs the rest of the chain, or answers 413 (the response, for the frame to set). */
  const limited = async (c: Context<GatewayEnvVars>, next: () => Promise<void>): Promise<Response | undefined> => {
    const raw = c.req.raw;
    if (raw.body && c.req.path.startsWith("/v1/")) {
      const length = raw.headers.get("content-length");
      if (length === null || raw.headers.has("transfer-encoding")) {
        try {
          await streamed(c, next);
        } catch (err) {
          if (err instanceof ProblemError) return problemResponse(c, err);
          throw err;
        }
        return undefined;
      }
      if (Number.parseInt(length, 10) > maxSize) return problemResponse(c, tooLarge());
    }
    await next();
    return undefined;
  };
  return async (c, next) => {
    const t0 = performance.now();
    const id = requestIdOf(c.req.header("x-request-id"));
    c.set("requestId", id);
    c.header("X-Request-Id", id);
    const early = await limited(c, next);
    if (early) c.res = early;
    const seconds = (performance.now() - t0) / 1000;
    // The route pattern, never the raw URL: facade GETs carry the client's key in the query.
    const route = routePath(c, -1) || "unmatched";
    deps.metrics?.request(c.req.method, route, c.res.status, seconds);
    if (route !== "/metrics" && route !== "/healthz" && deps.log.isLevelEnabled("info"))
      deps.log.info(
        { requestId: id, method: c.req.method, route, status: c.res.status, ms: Math.round(seconds * 1000) },
        "request",
      );
  };
}
