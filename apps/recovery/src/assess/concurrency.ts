// The `limits` line of `assess`: each solver's adaptive provider concurrency (ADAPTIVE_CONCURRENCY=1),
// as its heartbeat says it (the same figures as its gauge solver_provider_concurrency_limit).
import type { Heartbeat } from "@pipeline/shared/kv";
import type { Check } from "./model.ts";

/**
 * One line for the solvers that adapt (none when no solver does): per solver and account, the
 * limit over the plan and the places held. A limit at 1 under a larger plan is a warning: the
 * provider refuses nearly every task of that account.
 */
export function concurrencyChecks(ws: Heartbeat[]): Check[] {
  const parts: string[] = [];
  let floored = false;
  for (const w of ws) {
    for (const [keyRef, l] of Object.entries(w.concurrencyLimits ?? {})) {
      parts.push(`${w.workerId} ${keyRef} ${l.limit}/${l.plan} (${l.held} held)`);
      if (l.limit <= 1 && l.plan > 1) floored = true;
    }
  }
  if (parts.length === 0) return [];
  return [
    {
      name: "limits",
      level: floored ? "warn" : "ok",
      summary: `adaptive provider concurrency (limit/plan): ${parts.join(", ")}`,
      ...(floored
        ? {
            hint: "an account's limit is down to 1: its provider refuses new tasks (ERROR_NO_SLOT_AVAILABLE, 429, timeouts); check the account at the provider (docs/providers.md, Adaptive concurrency)",
          }
        : {}),
    },
  ];
}
