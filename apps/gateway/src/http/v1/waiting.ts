import type { GatewayDeps } from "../../deps.ts";
import { createWaitLimits } from "../../domain/wait-limits.ts";
import { ProblemError } from "../problem.ts";

/** The waiting requests (long-polls and event streams) of one app: their caps and timings. */
export interface Waiting {
  /** A slot for a waiting request (call the result to give it back), or a 429 naming `field`. */
  slot(clientId: string, field: string): () => void;
  /** A waiting request re-reads its task at each event and at least this often (sooner for another region's task, whose events this gateway does not see). */
  recheckMs(region: string): number;
  /** How long an event stream lives (SSE_MAX_SECONDS). */
  sseMaxMs: number;
}

export function createWaiting(deps: Pick<GatewayDeps, "config">): Waiting {
  const limits = createWaitLimits({
    perKey: deps.config.LONG_POLL_MAX_PER_KEY ?? 2000,
    total: deps.config.LONG_POLL_MAX_TOTAL ?? 20_000,
  });
  return {
    slot(clientId, field) {
      const release = limits.enter(clientId);
      if (!release) {
        throw new ProblemError(
          429,
          "Too Many Waiting Requests",
          "this API key (or the gateway) holds as many long-polls and event streams as allowed; retry shortly or poll without ?wait",
          [{ field, message: "too many waiting requests" }],
          { "retry-after": "1" },
        );
      }
      return release;
    },
    recheckMs: (region) => (region === deps.config.REGION ? (deps.config.LONG_POLL_RECHECK_MS ?? 5000) : 1000),
    sseMaxMs: (deps.config.SSE_MAX_SECONDS ?? 300) * 1000,
  };
}
