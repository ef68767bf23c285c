import { isConnectionError } from "@pipeline/shared/db";
import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import { HomeUnreachableError } from "../adapters/home-tokens.ts";
import { createGatewayDeps, type GatewayDeps, type GatewayParts } from "../deps.ts";
import { createAuthenticator } from "./auth.ts";
import type { GatewayEnvVars } from "./env.ts";
import { healthRoutes } from "./health.ts";
import { openApiDocument } from "./openapi.ts";
import { ProblemError, problemResponse } from "./problem.ts";
import { requestFrame } from "./request-frame.ts";
import { twoCaptchaRoutes } from "./twocaptcha/routes.ts";
import { poolsRoutes } from "./v1/pools.ts";
import { tasksRoutes } from "./v1/tasks.ts";
import { usageRoutes } from "./v1/usage.ts";
import { webhookSecretRoutes } from "./v1/webhook-secret.ts";

/**
 * The operator side of the gateway, on its own listener (`GATEWAY_METRICS_HOST:GATEWAY_METRICS_PORT`,
 * never the clients' one, issue 14.7): `/metrics` and the health checks.
 */
export function createMetricsApp(deps: Pick<GatewayDeps, "store" | "queue" | "log" | "metrics" | "readiness">) {
  const app = new Hono();
  app.get("/metrics", (c) => (deps.metrics ? deps.metrics.response() : c.text("metrics off", 404)));
  app.route("/", healthRoutes(deps));
  app.notFound((c) => c.text("not found", 404));
  return app;
}

/**
 * The gateway's Hono app, one HTTP layer with two faces (`v1/`: REST, problem+json; `twocaptcha/`:
 * the 2Captcha protocol): sub-apps mounted with route(), one onError rendering problem+json. The
 * dependency bag is built here, once, and shared by every route.
 */
export function createApp(parts: GatewayParts) {
  const deps = createGatewayDeps(parts);
  const app = new Hono<GatewayEnvVars>();
  app.use("*", requestFrame(deps));
  app.route("/", healthRoutes(deps));
  const doc = openApiDocument({ imageMaxBytes: deps.config.IMAGE_MAX_BYTES });
  app.get("/openapi.json", (c) => c.json(doc));
  const auth = createAuthenticator(deps);
  app.route("/", twoCaptchaRoutes(deps, auth)); // 2Captcha in.php/res.php, outside the /v1/* body limit (it has its own)
  app.route("/v1/tasks", tasksRoutes(deps, auth));
  app.route("/v1/webhook-secret", webhookSecretRoutes(deps, auth));
  app.route("/v1/usage", usageRoutes(deps, auth));
  app.route("/v1/pools", poolsRoutes(deps, auth));
  app.notFound((c) => problemResponse(c, new ProblemError(404, "Not Found", `no route ${c.req.method} ${c.req.path}`)));
  app.onError((err, c) => {
    if (err instanceof ProblemError) return problemResponse(c, err);
    if (err instanceof HTTPException)
      return problemResponse(c, new ProblemError(err.status as 400, err.message || "HTTP Error"));
    if (err instanceof HomeUnreachableError) {
      c.header("retry-after", "1");
      c.header("x-home-region", err.row.region);
      return problemResponse(
        c,
        new ProblemError(
          503,
          "Result Held By Home Region",
          `the result of task ${err.row.id} is held by region ${err.row.region}, which does not answer right now; retry shortly`,
        ),
      );
    }
    if (isConnectionError(err)) {
      deps.log.warn({ requestId: c.get("requestId"), err: err.message }, "database unavailable");
      c.header("retry-after", "1");
      return problemResponse(
        c,
        new ProblemError(503, "Database Unavailable", "Postgres is unreachable right now; retry shortly"),
      );
    }
    deps.log.error(
      { requestId: c.get("requestId"), err: { name: err.name, message: err.message, stack: err.stack } },
      "unhandled error",
    );
    return problemResponse(c, new ProblemError(500, "Internal Server Error", "unexpected error; quote the requestId"));
  });
  return app;
}
