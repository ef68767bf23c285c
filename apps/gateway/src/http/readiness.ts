import type { GatewayDeps } from "../deps.ts";

export type DependencyState = "ok" | "down";
export interface ReadinessReport {
  ready: boolean;
  nats: DependencyState;
  postgres: DependencyState;
}

/** The gateway's readiness: NATS and Postgres reachable, asked at most once per `ttlMs`. */
export interface Readiness {
  check(): Promise<ReadinessReport>;
}

/**
 * A readiness check whose answer is reused for `ttlMs` (1 s), and whose round trips are shared by
 * every caller that asks meanwhile: however often the load balancers, Prometheus or anyone on the
 * network ask `/readyz`, Postgres and NATS see at most one ping per `ttlMs` from it.
 */
export function createReadiness(
  deps: Pick<GatewayDeps, "store" | "queue"> & { log?: GatewayDeps["log"] },
  o: { ttlMs?: number; timeoutMs?: number; now?: () => number } = {},
): Readiness {
  const ttlMs = o.ttlMs ?? 1000;
  const timeoutMs = o.timeoutMs ?? 2000;
  const now = o.now ?? Date.now;
  let last: { at: number; report: ReadinessReport } | undefined;
  let inFlight: Promise<ReadinessReport> | undefined;
  // "ok" or "down" only: a driver's error text (hosts, users, database names) is for the log.
  const probe = async (what: string, f: () => Promise<void>): Promise<DependencyState> => {
    try {
      await Promise.race([f(), Bun.sleep(timeoutMs).then(() => Promise.reject(new Error("timeout")))]);
      return "ok";
    } catch (err) {
      deps.log?.warn({ dependency: what, err: (err as Error).message }, "readiness check failed");
      return "down";
    }
  };
  const run = async (): Promise<ReadinessReport> => {
    const [nats, postgres] = await Promise.all([
      probe("nats", () => deps.queue.ping()),
      probe("postgres", () => deps.store.ping()),
    ]);
    const report = { ready: nats === "ok" && postgres === "ok", nats, postgres };
    last = { at: now(), report };
    return report;
  };
  return {
    check() {
      if (last && now() - last.at < ttlMs) return Promise.resolve(last.report);
      inFlight ??= run().finally(() => {
        inFlight = undefined;
      });
      return inFlight;
    },
  };
}
