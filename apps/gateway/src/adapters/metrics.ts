import type { Db } from "@pipeline/shared/db";
import { Counter, createRegistry, Gauge, Histogram, HTTP_BUCKETS, metricsResponse } from "@pipeline/shared/metrics";
import { sql } from "drizzle-orm";

/**
 * The gateway's Prometheus metrics. Task counts by state are read from Postgres at most every
 * `countsEveryMs` (a count of the whole table per scrape, per gateway, per scraper, is the cost
 * otherwise); a scrape in between answers the last counts.
 */
export function createGatewayMetrics(db: Db, o: { countsEveryMs?: number; now?: () => number } = {}) {
  const every = o.countsEveryMs ?? 15_000;
  const now = o.now ?? Date.now;
  let reads = 0;
  let counts: { at: number; rows: Promise<{ state: string; type: string; n: number }[]> } | undefined;
  const taskCounts = () => {
    if (!counts || now() - counts.at >= every) {
      reads++;
      counts = {
        at: now(),
        rows: db
          .execute<{ state: string; type: string; n: number }>(
            sql`select state, type, count(*)::int as n from tasks group by state, type`,
          )
          .then((r) => [...r])
          .catch(() => []),
      };
    }
    return counts.rows;
  };
  const registry = createRegistry("gateway");
  const http = new Histogram({
    name: "gateway_http_request_duration_seconds",
    help: "HTTP requests by method, route and status",
    labelNames: ["method", "route", "status"],
    buckets: HTTP_BUCKETS,
    registers: [registry],
  });
  const submitted = new Counter({
    name: "gateway_tasks_submitted_total",
    help: "Submissions by type and result (accepted, replayed, rejected)",
    labelNames: ["type", "result"],
    registers: [registry],
  });
  const authFailures = new Counter({
    name: "gateway_auth_failures_total",
    help: "Failed authentications: an unknown API key, or a source refused while throttled",
    labelNames: ["result"],
    registers: [registry],
  });
  const quotaRefusals = new Counter({
    name: "gateway_quota_refusals_total",
    help: "Requests refused by an API key's quota, by quota",
    labelNames: ["quota"],
    registers: [registry],
  });
  new Gauge({
    name: "pipeline_tasks",
    help: "Tasks by state and type (from Postgres)",
    labelNames: ["state", "type"],
    registers: [registry],
    async collect() {
      this.reset();
      const rows = await taskCounts();
      for (const r of rows) this.set({ state: r.state, type: r.type }, r.n);
    },
  });
  const reports = new Counter({
    name: "gateway_reports_total",
    help: "Client reports on solved tasks taken (REST and the facade), by task type and verdict; the solvers forward them",
    labelNames: ["type", "verdict"],
    registers: [registry],
  });
  const pools = poolMetrics(registry);
  return {
    registry,
    ...pools,
    request: (method: string, route: string, status: number, seconds: number) =>
      http.observe({ method, route, status: String(status) }, seconds),
    submitted: (type: string, result: "accepted" | "replayed" | "rejected") => submitted.inc({ type, result }),
    quotaRefused: (quota: string) => quotaRefusals.inc({ quota }),
    reported: (type: string, accepted: boolean) => reports.inc({ type, verdict: accepted ? "good" : "bad" }),
    authFailure: (result: "unknown_key" | "throttled") => authFailures.inc({ result }),
    response: () => metricsResponse(registry),
    /** How many times the task counts were read from Postgres (for the test of the cache). */
    countReads: () => reads,
  };
}
export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;

/** Warm pools (docs/warm-pools.md), labelled `<client id>/<name>` (at most POOL_MAX_PER_CLIENT per client). */
function poolMetrics(registry: ReturnType<typeof createRegistry>) {
  const takes = new Counter({
    name: "gateway_pool_takes_total",
    help: "Warm pool takes by pool and result (hit: a ready token handed out; miss: a task submitted)",
    labelNames: ["pool", "result"],
    registers: [registry],
  });
  const submitted = new Counter({
    name: "gateway_pool_submitted_total",
    help: "Tasks a warm pool's keeper submitted to keep it full, by pool",
    labelNames: ["pool"],
    registers: [registry],
  });
  const wasted = new Counter({
    name: "gateway_pool_wasted_total",
    help: "Warm pool tokens that passed the pool's max age never handed out, by pool",
    labelNames: ["pool"],
    registers: [registry],
  });
  const ready = new Gauge({
    name: "gateway_pool_tokens",
    help: "A warm pool's tokens at the keeper's last round on this gateway: ready, lasting (valid a solve time from now), in_progress",
    labelNames: ["pool", "kind"],
    registers: [registry],
  });
  const shown = new Set<string>();
  return {
    poolTake: (pool: string, result: "hit" | "miss") => takes.inc({ pool, result }),
    poolSubmitted: (pool: string, n: number) => submitted.inc({ pool }, n),
    poolWasted: (pool: string, n: number) => wasted.inc({ pool }, n),
    poolReady: (pool: string, lasting: number, readyNow: number, inProgress: number) => {
      shown.add(pool);
      ready.set({ pool, kind: "ready" }, readyNow);
      ready.set({ pool, kind: "lasting" }, lasting);
      ready.set({ pool, kind: "in_progress" }, inProgress);
    },
    /** The live pools of a keeper round: a deleted pool's gauges go. */
    poolsLive: (pools: readonly string[]) => {
      const live = new Set(pools);
      for (const pool of shown)
        if (!live.has(pool)) {
          for (const kind of ["ready", "lasting", "in_progress"]) ready.remove({ pool, kind });
          shown.delete(pool);
        }
    },
  };
}
