import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { openDatabase } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, ensureStreams } from "@pipeline/shared/nats";
import { createTaskQueue, createTaskWatcher } from "./adapters/nats.ts";
import { createTaskStore } from "./adapters/pg.ts";
import { loadConfig } from "./config.ts";
import { createApiKeys } from "./domain/api-keys.ts";
import { createApp } from "./http/app.ts";

const log = createLogger("gateway");
const config = loadConfig(process.env);
const nc = await connectNats(config.NATS_URL, "gateway");
const jsm = await jetstreamManager(nc);
await ensureStreams(jsm, { region: config.REGION });
const js = jetstream(nc);
const database = openDatabase(config.DATABASE_URL, { max: config.DB_POOL_MAX, appName: "gateway" });
const watcher = createTaskWatcher(nc, config.REGION);
const app = createApp({
  config,
  store: createTaskStore(database.db),
  queue: createTaskQueue(nc, js, config.REGION, config.PUBLISH_DEADLINE_MS),
  watcher,
  apiKeys: createApiKeys(config.API_KEYS),
  log,
});
const server = Bun.serve({ hostname: config.GATEWAY_HOST, port: config.GATEWAY_PORT, fetch: app.fetch, idleTimeout: Math.min(255, config.MAX_WAIT_SECONDS + 10) });
log.info({ url: `http://${config.GATEWAY_HOST}:${server.port}`, region: config.REGION }, "gateway listening");

let stopping = false;
async function stop(signal: string) {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, "gateway stopping");
  await server.stop(false);
  watcher.close();
  await nc.drain().catch(() => {});
  await database.close().catch(() => {});
  process.exit(0);
}
process.on("SIGTERM", () => void stop("SIGTERM"));
process.on("SIGINT", () => void stop("SIGINT"));
