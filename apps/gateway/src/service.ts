import { jetstreamManager } from "@nats-io/jetstream";
import { type Db, openDatabase } from "@pipeline/shared/db";
import { fairShareView, pollFairShare } from "@pipeline/shared/fair-share";
import { bindBucket } from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";
import {
  connectNats,
  type NatsConnection,
  natsAuthFromEnv,
  requireStreams,
  TOPOLOGY_WAIT_MS,
} from "@pipeline/shared/nats";
import { watchFence } from "@pipeline/shared/regions";
import { buckets, streams } from "@pipeline/shared/subjects";
import { serveHomeTokens, withHomeTokens } from "./adapters/home-tokens.ts";
import { createGatewayMetrics } from "./adapters/metrics.ts";
import { createTaskQueue, createTaskWatcher } from "./adapters/nats.ts";
import { createTaskStore } from "./adapters/pg.ts";
import { createPoolStore } from "./adapters/pools.ts";
import { createReportStore } from "./adapters/reports.ts";
import { createSolveTimes } from "./adapters/solve-times.ts";
import { createSpendSource } from "./adapters/spend.ts";
import { createUsageSource } from "./adapters/usage.ts";
import type { GatewayConfig } from "./config.ts";
import type { GatewayParts } from "./deps.ts";
import { createApiKeys } from "./domain/api-keys.ts";
import { createQuotas } from "./domain/quotas.ts";
import { withAbsoluteUrl } from "./http/absolute-url.ts";
import { createApp, createMetricsApp } from "./http/app.ts";
import { createReadiness } from "./http/readiness.ts";
import { startPoolKeeper } from "./tasks/pools.ts";

export interface GatewayService {
  url: string;
  /** The metrics listener (`/metrics`, `/readyz`, `/healthz`) when GATEWAY_METRICS_PORT is set. */
  metricsUrl?: string;
  /** Stops accepting connections, then closes NATS and Postgres. */
  stop(): Promise<void>;
}

/** Wires config -> adapters -> Hono app and serves it. */
export async function startGateway(config: GatewayConfig, log: Logger): Promise<GatewayService> {
  const { nc, waiting } = await connectToTopology(config, log);
  const database = openDatabase(config.DATABASE_URL, { max: config.DB_POOL_MAX, appName: "gateway" });
  const fence =
    config.regions.length > 1
      ? watchFence(await bindBucket(nc, buckets.region(config.REGION), waiting), config.REGION, log)
      : undefined;
  const fairShare = await watchFairShare(nc, config.REGION, log);
  const parts = { ...buildGatewayParts(config, log, nc, database.db), fairShare };
  // With several regions: answer the others' gateways for this region's tokens (adapters/home-tokens.ts).
  const tokens =
    config.regions.length > 1 ? serveHomeTokens({ nc, region: config.REGION, store: parts.store, log }) : undefined;
  logClientIds(config, log);
  warnLoosenedWebhooks(config, log);
  const served = serveGateway(config, { ...parts, ...(fence ? { fence } : {}) });
  // Every gateway keeps the warm pools; a per-pool advisory lock lets one fill a pool at a time.
  const keeper = startPoolKeeper(
    { ...parts, ...(fence ? { fence } : {}), now: () => new Date() },
    { tickMs: config.POOL_TICK_MS, defaultSolveMs: config.SCHEDULE_DEFAULT_SOLVE_MS },
  );
  log.info(
    {
      url: served.url,
      region: config.REGION,
      ...(served.metricsUrl ? { metrics: `${served.metricsUrl}/metrics` } : {}),
    },
    "gateway listening",
  );
  return {
    url: served.url,
    ...(served.metricsUrl ? { metricsUrl: served.metricsUrl } : {}),
    async stop() {
      fence?.stop();
      fairShare.stop();
      tokens?.unsubscribe();
      await served.server.stop(false);
      await served.metricsServer?.stop(true);
      await keeper.stop();
      parts.watcher.close();
      await nc.drain().catch(() => {});
      await database.close().catch(() => {});
    },
  };
}

/**
 * The region's fair-share record (`recovery fair-share set`), read at start and every 5 s: which
 * group a client's tasks go to. A record that does not parse is logged and the previous kept.
 */
async function watchFairShare(nc: NatsConnection, region: string, log: Logger) {
  const poll = pollFairShare({
    jsm: await jetstreamManager(nc),
    region,
    onRejected: (error) => log.error({ error }, "fair-share record refused; the previous one stays in use"),
    onChange: (record) => {
      view = fairShareView(record);
      log.info({ groups: view.groups() }, "fair-share groups in use");
    },
    onError: (err) => log.warn({ err: err.message }, "fair-share record unreadable"),
  });
  let view = fairShareView(null);
  await poll.refresh().catch((err: Error) => log.warn({ err: err.message }, "fair-share record unreadable"));
  return { groupOf: (clientId: string) => view.groupOf(clientId), stop: () => poll.stop() };
}

/** What a wait for the administering side's NATS objects is given (how long, what to log meanwhile). */
type TopologyWait = Parameters<typeof requireStreams>[2];

/** Connects to NATS and returns once the region's streams are there. */
async function connectToTopology(
  config: GatewayConfig,
  log: Logger,
): Promise<{ nc: NatsConnection; waiting: TopologyWait }> {
  const nc = await connectNats(config.NATS_URL, "gateway", natsAuthFromEnv(config), (e) =>
    log.error({ err: e.message }, "nats error"),
  );
  // The region's streams are the administering side's (the recovery service creates them at start):
  // the gateway's user may not create or change one. It waits for them, then serves.
  const waiting = {
    waitMs: TOPOLOGY_WAIT_MS,
    onWait: (missing: string[]) =>
      log.warn({ missing }, "waiting for the region's NATS topology (created by the recovery service)"),
  };
  await requireStreams(
    await jetstreamManager(nc),
    [streams.tasks(config.REGION), streams.events(config.REGION), streams.bodies(config.REGION)],
    waiting,
  );
  return { nc, waiting };
}

/** The gateway's adapters and domain parts over one NATS connection and one database (no fence). */
function buildGatewayParts(config: GatewayConfig, log: Logger, nc: NatsConnection, db: Db) {
  const store = createTaskStore(db);
  // The result reads: another region's row carries its home's token (submit, cancel, retry need none).
  const results = config.regions.length > 1 ? withHomeTokens(store, { nc, region: config.REGION, log }) : store;
  const queue = createTaskQueue(nc, config.REGION, config.PUBLISH_DEADLINE_MS);
  const apiKeys = createApiKeys(config.API_KEYS, { pepper: config.API_KEY_PEPPER });
  return {
    config,
    log,
    store,
    results,
    queue,
    watcher: createTaskWatcher(nc, config.REGION),
    apiKeys,
    metrics: createGatewayMetrics(db),
    readiness: createReadiness({ store, queue, log }),
    reports: createReportStore(db),
    pools: createPoolStore(db),
    spend: createSpendSource(db),
    solveTimes: createSolveTimes(db, log, { windowMs: config.SCHEDULE_SOLVE_WINDOW_MS }),
    // Without QUOTAS nothing is limited; GET /v1/usage still shows each key its figures.
    quotas: createQuotas({
      ...(config.QUOTAS ? { config: config.QUOTAS } : {}),
      ...(config.TASK_PRICES ? { prices: config.TASK_PRICES } : {}),
      source: createUsageSource(db),
      refreshMs: config.QUOTA_REFRESH_MS,
    }),
  } satisfies GatewayParts;
}

function warnLoosenedWebhooks(config: GatewayConfig, log: Logger): void {
  if (config.WEBHOOK_ALLOW_HTTP || config.WEBHOOK_ALLOW_PRIVATE)
    log.warn(
      { WEBHOOK_ALLOW_HTTP: config.WEBHOOK_ALLOW_HTTP, WEBHOOK_ALLOW_PRIVATE: config.WEBHOOK_ALLOW_PRIVATE },
      "callbackUrl policy loosened: for dev stacks and tests only",
    );
}

/** Serves the clients' app, and the metrics app on its own listener when GATEWAY_METRICS_PORT is set. */
function serveGateway(
  config: GatewayConfig,
  parts: ReturnType<typeof buildGatewayParts> & Pick<GatewayParts, "fence">,
) {
  const server = Bun.serve({
    hostname: config.GATEWAY_HOST,
    port: config.GATEWAY_PORT,
    fetch: withAbsoluteUrl(createApp(parts).fetch),
    idleTimeout: Math.min(255, config.MAX_WAIT_SECONDS + 10),
    // Lingering close: a body over MAX_BODY_BYTES is answered 413 at once, and the rest of it is
    // read and dropped as it arrives (not buffered) so a client that writes its whole body before
    // reading gets the 413, not a broken pipe (app.int.test.ts). Up to this bound; a longer body's
    // connection is cut (docs/security.md, "Request limits").
    maxRequestBodySize: LINGER_MAX_BYTES,
  });
  // /metrics is not on the clients' listener (issue 14.7): its own, loopback by default, or none.
  const metricsServer =
    config.GATEWAY_METRICS_PORT === undefined
      ? undefined
      : Bun.serve({
          hostname: config.GATEWAY_METRICS_HOST,
          port: config.GATEWAY_METRICS_PORT,
          fetch: withAbsoluteUrl(createMetricsApp(parts).fetch),
        });
  return {
    server,
    metricsServer,
    url: `http://${config.GATEWAY_HOST}:${server.port}`,
    metricsUrl: metricsServer ? `http://${config.GATEWAY_METRICS_HOST}:${metricsServer.port}` : undefined,
  };
}

/** How client ids are derived (issue 14.8); never the keys nor the pepper. */
/** The most of an oversized body the gateway reads and drops before it cuts the connection. */
export const LINGER_MAX_BYTES = 128 * 1024 * 1024;

export function logClientIds(config: GatewayConfig, log: Logger): void {
  // Dev stacks and tests (API_KEYS_ALLOW_SHORT) run unpeppered on purpose.
  if (!config.API_KEY_PEPPER && !config.API_KEYS_ALLOW_SHORT)
    log.warn(
      "client ids are unpeppered (a sha256 prefix of each key): set API_KEY_PEPPER (docs/security.md, client ids)",
    );
}
