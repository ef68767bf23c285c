import { Hono } from "hono";
import type { GatewayDeps } from "./deps.ts";

/** `/healthz` (the process answers) and `/readyz` (NATS and Postgres reachable). */
export function healthRoutes(deps: Pick<GatewayDeps, "store" | "queue">) {
  const app = new Hono();
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", async (c) => {
    const check = async (f: () => Promise<void>) => {
      try {
        await Promise.race([f(), Bun.sleep(2000).then(() => Promise.reject(new Error("timeout")))]);
        return "ok";
      } catch (err) {
        return `down: ${(err as Error).message}`;
      }
    };
    const [nats, postgres] = await Promise.all([check(() => deps.queue.ping()), check(() => deps.store.ping())]);
    const ok = nats === "ok" && postgres === "ok";
    return c.json({ status: ok ? "ready" : "not ready", nats, postgres }, ok ? 200 : 503);
  });
  return app;
}
