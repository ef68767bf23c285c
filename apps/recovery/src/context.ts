import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { type Database, openDatabase } from "@pipeline/shared/db";
import type { Logger } from "@pipeline/shared/log";
import { connectNats, type NatsConnection, natsAuthFromEnv } from "@pipeline/shared/nats";
import type { RecoveryConfig } from "./config.ts";

/** What the recovery commands work on: one NATS connection and one database pool. */
export interface RecoveryContext {
  region: string;
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  database: Database;
  log: Logger;
  publishDeadlineMs: number;
  /** STREAM_REPLICAS: what a recreated stream gets. */
  streamReplicas?: number;
}

/**
 * How long recovery's JetStream API calls (stream delete and create, stream info) wait for the
 * server: 30 s, not the client's 5 s. They run during incidents, on a server that may be slow
 * (a stream delete on a busy disk once took over 5 s in CI); a destructive call that times out
 * leaves the operator not knowing whether it happened, a slow one only adds to the RTO.
 */
export const RECOVERY_JS_API_TIMEOUT_MS = 30_000;

/** Raised when a command misses a setting it needs; the CLI prints it without a stack. */
export class UsageError extends Error {
  override name = "UsageError";
}

/** Connects to NATS and Postgres; `close()` drains the one and ends the other. */
export async function openContext(
  config: RecoveryConfig,
  log: Logger,
  name = "recovery",
): Promise<RecoveryContext & { close(): Promise<void> }> {
  if (!config.DATABASE_URL) throw new UsageError("DATABASE_URL is required for this command");
  const nc = await connectNats(config.NATS_URL, name, natsAuthFromEnv(config), (e) =>
    log.error({ err: e.message }, "nats error"),
  );
  const database = openDatabase(config.DATABASE_URL, { max: config.DB_POOL_MAX, appName: name });
  return {
    region: config.REGION,
    nc,
    js: jetstream(nc),
    jsm: await jetstreamManager(nc, { timeout: RECOVERY_JS_API_TIMEOUT_MS }),
    database,
    log,
    publishDeadlineMs: config.PUBLISH_DEADLINE_MS,
    streamReplicas: config.STREAM_REPLICAS,
    async close() {
      await nc.drain().catch(() => {});
      await database.close();
    },
  };
}
