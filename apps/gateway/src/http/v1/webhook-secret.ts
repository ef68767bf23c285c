import { clientWebhookSecret } from "@pipeline/shared/webhooks";
import { Hono } from "hono";
import type { GatewayDeps } from "../../deps.ts";
import type { Authenticator } from "../auth.ts";
import type { GatewayEnvVars } from "../env.ts";
import { ProblemError } from "../problem.ts";

/**
 * `GET /v1/webhook-secret`: the calling client's own callback signing secret (and the previous one
 * during a rotation of the master or of its own secret), derived from the operator's master `WEBHOOK_SECRET`. A client learns only
 * its own: it cannot sign a callback another client's receiver accepts (issue 14.3).
 */
export function webhookSecretRoutes(deps: GatewayDeps, auth: Authenticator) {
  const app = new Hono<GatewayEnvVars>();
  app.get("/", (c) => {
    const clientId = auth.bearer(c);
    const master = deps.config.WEBHOOK_SECRET;
    if (!master)
      throw new ProblemError(
        404,
        "Callbacks Not Signed",
        "this gateway has no WEBHOOK_SECRET: callbacks are not signed here",
      );
    c.header("cache-control", "no-store");
    // A client's own rotation (its generation raised, WEBHOOK_CLIENT_GENERATIONS): `previous` is its
    // secret at the previous generation, which the solvers sign with too until it is removed.
    const gen = deps.config.WEBHOOK_CLIENT_GENERATIONS?.[clientId] ?? { current: 0 };
    // Otherwise, during a rotation of the master (WEBHOOK_SECRET_PREVIOUS): its secret under the old master.
    const previous =
      gen.previous !== undefined
        ? clientWebhookSecret(master, clientId, gen.previous)
        : deps.config.WEBHOOK_SECRET_PREVIOUS &&
          clientWebhookSecret(deps.config.WEBHOOK_SECRET_PREVIOUS, clientId, gen.current);
    return c.json({
      clientId,
      secret: clientWebhookSecret(master, clientId, gen.current),
      ...(previous ? { previous } : {}),
    });
  });
  return app;
}
