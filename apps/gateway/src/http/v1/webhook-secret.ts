import { Hono } from "hono";
import { clientWebhookSecret } from "@pipeline/shared/webhooks";
import type { GatewayDeps } from "../../deps.ts";
import type { Authenticator } from "../auth.ts";
import type { GatewayEnvVars } from "../env.ts";
import { ProblemError } from "../problem.ts";

/**
 * `GET /v1/webhook-secret`: the calling client's own callback signing secret (and the previous one
 * during a rotation), derived from the operator's master `WEBHOOK_SECRET`. A client learns only
 * its own: it cannot sign a callback another client's receiver accepts (issue 14.3).
 */
export function webhookSecretRoutes(deps: GatewayDeps, auth: Authenticator) {
  const app = new Hono<GatewayEnvVars>();
  app.get("/", (c) => {
    const clientId = auth.bearer(c);
    const master = deps.config.WEBHOOK_SECRET;
    if (!master) throw new ProblemError(404, "Callbacks Not Signed", "this gateway has no WEBHOOK_SECRET: callbacks are not signed here");
    const previous = deps.config.WEBHOOK_SECRET_PREVIOUS;
    c.header("cache-control", "no-store");
    return c.json({ clientId, secret: clientWebhookSecret(master, clientId), ...(previous ? { previous: clientWebhookSecret(previous, clientId) } : {}) });
  });
  return app;
}
