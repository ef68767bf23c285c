import { Hono } from "hono";
import type { GatewayDeps } from "../../deps.ts";
import { createQuotas } from "../../domain/quotas.ts";
import type { Authenticator } from "../auth.ts";
import type { GatewayEnvVars } from "../env.ts";

/** `GET /v1/usage`: the calling key's own figures and limits, never another key's. */
export function usageRoutes(deps: GatewayDeps, auth: Authenticator) {
  const app = new Hono<GatewayEnvVars>();
  const none = createQuotas({
    source: { openByOwner: async () => new Map(), createdSince: async (_o, from) => ({ settledTo: from, rows: [] }) },
  });
  app.get("/", async (c) => {
    const clientId = auth.bearer(c);
    c.header("cache-control", "no-store");
    return c.json(await (deps.quotas ?? none).usage(clientId));
  });
  return app;
}
