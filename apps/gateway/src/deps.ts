import type { Logger } from "@pipeline/shared/log";
import type { GatewayMetrics } from "./adapters/metrics.ts";
import type { TaskQueue, TaskWatcher } from "./adapters/nats.ts";
import type { TaskStore } from "./adapters/pg.ts";
import type { PoolStore } from "./adapters/pools.ts";
import type { ReportStore } from "./adapters/reports.ts";
import type { SolveTimes } from "./adapters/solve-times.ts";
import type { SpendSource } from "./adapters/spend.ts";
import type { GatewayConfig } from "./config.ts";
import type { ApiKeys } from "./domain/api-keys.ts";
import type { Quotas } from "./domain/quotas.ts";
import type { Readiness } from "./http/readiness.ts";

/**
 * Everything the gateway's HTTP faces and use cases read, built once per app by
 * `createGatewayDeps` (service.ts passes the real adapters; tests pass their own) and passed down.
 */
export interface GatewayDeps {
  /** The WEBHOOK_ALLOW_* flags default to off (https, public hosts only). */
  config: Pick<
    GatewayConfig,
    "REGION" | "MAX_BODY_BYTES" | "IMAGE_MAX_BYTES" | "MAX_WAIT_SECONDS" | "TASK_DEADLINE_MS"
  > &
    Partial<
      Pick<
        GatewayConfig,
        | "WEBHOOK_ALLOW_HTTP"
        | "WEBHOOK_ALLOW_PRIVATE"
        | "regions"
        | "WEBHOOK_SECRET"
        | "WEBHOOK_SECRET_PREVIOUS"
        | "LONG_POLL_MAX_PER_KEY"
        | "LONG_POLL_MAX_TOTAL"
        | "LONG_POLL_RECHECK_MS"
        | "SSE_MAX_SECONDS"
        | "AUTH_FAIL_MAX"
        | "AUTH_FAIL_MAX_PER_SOURCE"
        | "AUTH_FAIL_WINDOW_MS"
        | "GATEWAY_TRUSTED_PROXIES"
        | "WEBHOOK_CLIENT_GENERATIONS"
        | "REPORT_WINDOW_MS"
        | "SCHEDULE_MAX_AHEAD_MS"
        | "SCHEDULE_MARGIN_MS"
        | "SCHEDULE_DEFAULT_SOLVE_MS"
        | "POOL_MAX_PER_CLIENT"
        | "TASK_PRICES"
      >
    >;
  store: TaskStore;
  /**
   * The reads that hand out results (GET, its long-poll, SSE, res.php): with several regions the
   * store whose other-region rows carry their home's token (adapters/home-tokens.ts). Submit,
   * cancel and retry read `store`: they need no token. Absent: `store`.
   */
  results?: Pick<TaskStore, "get" | "getMany">;
  queue: TaskQueue;
  watcher: TaskWatcher;
  apiKeys: ApiKeys;
  log: Logger;
  metrics?: GatewayMetrics;
  /** Clients' reports on solved tasks, for the solvers to forward; absent: reports are refused (503). */
  reports?: ReportStore;
  /** The calling key's spend from the ledger (`GET /v1/usage`); absent: estimates only. */
  spend?: SpendSource;
  /** Per API key quotas (issue 14.6); absent: none. */
  quotas?: Quotas;
  /** The region's fair-share groups (docs/fair-share.md): a client's group decides its tasks' subjects; absent: none. */
  fairShare?: { groupOf(clientId: string): string | undefined };
  /** Warm pools (docs/warm-pools.md); absent: `/v1/pools` answers 503. */
  pools?: PoolStore;
  /** The measured p90 solve time per task type, for `needBy` starts; absent: the default lead. */
  solveTimes?: SolveTimes;
  /** With several regions: may this region accept new tasks (it holds its lease)? Absent: always. */
  fence?: { allows(): boolean };
  /** `/readyz`'s cached check, shared by both listeners; absent: each listener makes its own. */
  readiness?: Readiness;
  /** The clock task views and deadlines are computed with. */
  now: () => Date;
}

/** What a caller provides: the bag without its defaults (the clock: the system's). */
export type GatewayParts = Omit<GatewayDeps, "now"> & { now?: () => Date };

/** The dependency bag with its defaults filled in, once. */
export function createGatewayDeps(parts: GatewayParts): GatewayDeps {
  return { ...parts, now: parts.now ?? (() => new Date()) };
}
