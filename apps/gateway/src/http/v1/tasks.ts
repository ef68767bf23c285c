import { Hono } from "hono";
import type { GatewayDeps } from "../../deps.ts";
import type { Authenticator } from "../auth.ts";
import type { GatewayEnvVars } from "../env.ts";
import { cancelRoute } from "./cancel.ts";
import { eventsRoute } from "./events.ts";
import { readRoute } from "./read.ts";
import { reportRoute } from "./report.ts";
import { retryRoute } from "./retry.ts";
import { submitRoute } from "./submit.ts";
import { createWaiting } from "./waiting.ts";

/** `/v1/tasks`: submit and read tasks of the calling client. */
export function tasksRoutes(deps: GatewayDeps, auth: Authenticator) {
  const app = new Hono<GatewayEnvVars>();
  // One set of caps for the long-polls and the event streams.
  const waiting = createWaiting(deps);
  app.use("*", async (c, next) => {
    // Views carry tokens: no cache (a proxy's or the browser's) keeps one (issue 14, low).
    c.header("cache-control", "no-store");
    c.set("clientId", auth.bearer(c));
    await next();
  });
  app.post("/", submitRoute(deps));
  app.get("/:id", readRoute(deps, waiting));
  app.get("/:id/events", eventsRoute(deps, waiting));
  app.delete("/:id", cancelRoute(deps));
  app.post("/:id/retry", retryRoute(deps));
  app.post("/:id/report", reportRoute(deps));
  return app;
}
