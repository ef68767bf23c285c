import { Hono } from "hono";
import type { GatewayDeps } from "../deps.ts";
import { createReadiness, type Readiness } from "./readiness.ts";

/**
 * `/healthz` (the process answers) and `/readyz` (NATS and Postgres reachable, from a check cached
 * for a second: `readiness`, shared by the clients' and the metrics listener when given).
 */
export function healthRoutes(
  deps: Pick<GatewayDeps, "store" | "queue"> & { log?: GatewayDeps["log"]; readiness?: Readiness },
) {
  const app = new Hono();
  const readiness = deps.readiness ?? createReadiness(deps);
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", async (c) => {
    const r = await readiness.check();
    return c.json({ status: r.ready ? "ready" : "not ready", nats: r.nats, postgres: r.postgres }, r.ready ? 200 : 503);
  });
  return app;
}
