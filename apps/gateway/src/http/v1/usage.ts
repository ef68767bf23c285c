import { formatMicros } from "@pipeline/shared/provider";
import { Hono } from "hono";
import type { Spend } from "../../adapters/spend.ts";
import type { GatewayDeps } from "../../deps.ts";
import { createQuotas } from "../../domain/quotas.ts";
import type { Authenticator } from "../auth.ts";
import type { GatewayEnvVars } from "../env.ts";

const DAY_MS = 86_400_000;

/** A ledger figure as the reply shows it: micro-dollars, and dollars as text (never a float sum). */
const shown = (s: Spend) => ({ ...s, net: formatMicros(s.netMicros) });

/**
 * `GET /v1/usage`: the calling key's own figures and limits, never another key's. `spend` is what
 * the provider charged (less refunds), from the ledger; `spendToday` is the quotas' estimate
 * (accepted tasks × TASK_PRICES), which `dailySpend` counts, labelled as such by `spendTodaySource`.
 */
export function usageRoutes(deps: GatewayDeps, auth: Authenticator) {
  const app = new Hono<GatewayEnvVars>();
  const none = createQuotas({
    source: { openByOwner: async () => new Map(), createdSince: async (_o, from) => ({ settledTo: from, rows: [] }) },
  });
  app.get("/", async (c) => {
    const clientId = auth.bearer(c);
    c.header("cache-control", "no-store");
    const usage = await (deps.quotas ?? none).usage(clientId);
    const now = deps.now().getTime();
    const spend = deps.spend
      ? {
          source: "ledger" as const,
          today: shown(await deps.spend.since(clientId, new Date(Math.floor(now / DAY_MS) * DAY_MS))),
          last30Days: shown(await deps.spend.since(clientId, new Date(now - 30 * DAY_MS))),
        }
      : null;
    return c.json({ ...usage, spendTodaySource: "estimate: accepted tasks × TASK_PRICES", spend });
  });
  return app;
}
