import { Hono } from "hono";
import type { GatewayDeps } from "../deps.ts";
import { createReadiness, type Readiness } from "./readiness.ts";

/**
 * `/healthz` (the process answers) and `/readyz` (NATS and Postgres reachable, from a check cached
 * for a second: `readiness`, shared by the clients' and the metrics listener when given).
 * `/readyz/accepting` is the load balancers' check: ready and the region takes new tasks (not
 * fenced). A fenced region's gateways leave its LB, whose backup servers (the other region's
 * gateways) then answer for it; the deploy's check stays `/readyz` (a deploy is not rolled back
 * because the region is fenced).
 */
export function healthRoutes(
  deps: Pick<GatewayDeps, "store" | "queue" | "fence"> & { log?: GatewayDeps["log"]; readiness?: Readiness },
) {
  const app = new Hono();
  const readiness = deps.readiness ?? createReadiness(deps);
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", async (c) => {
    const r = await readiness.check();
    return c.json({ status: r.ready ? "ready" : "not ready", nats: r.nats, postgres: r.postgres }, r.ready ? 200 : 503);
  });
  app.get("/readyz/accepting", async (c) => {
    const r = await readiness.check();
    const fenced = deps.fence ? !deps.fence.allows() : false;
    const status = !r.ready ? "not ready" : fenced ? "fenced" : "accepting";
    return c.json({ status, nats: r.nats, postgres: r.postgres }, status === "accepting" ? 200 : 503);
  });
  return app;
}
