import { Hono } from "hono";
import type { GatewayDeps } from "../deps.ts";

/** `/healthz` (the process answers) and `/readyz` (NATS and Postgres reachable). */
export function healthRoutes(deps: Pick<GatewayDeps, "store" | "queue"> & { log?: GatewayDeps["log"] }) {
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", async (c) => {
    // "ok" or "down" only: a driver's error text (hosts, users, database names) is for the log.
    const check = async (what: string, f: () => Promise<void>) => {
      try {
        await Promise.race([f(), Bun.sleep(2000).then(() => Promise.reject(new Error("timeout")))]);
        return "ok";
      } catch (err) {
        deps.log?.warn({ dependency: what, err: (err as Error).message }, "readiness check failed");
        return "down";
      }
    };
    const [nats, postgres] = await Promise.all([check("nats", () => deps.queue.ping()), check("postgres", () => deps.store.ping())]);
    const ok = nats === "ok" && postgres === "ok";
    return c.json({ status: ok ? "ready" : "not ready", nats, postgres }, ok ? 200 : 503);
  });
  return app;
}
