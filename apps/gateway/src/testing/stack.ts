// For the gateway's integration tests: a nats-server with the region's streams, a database with
// the migrations, the gateway's app wired to both as in service.ts (connected as the gateway's own
// NATS user), an admin connection to inspect the streams. Not used outside tests.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, ensureStreams, type NatsConnection } from "@pipeline/shared/nats";
import { createTaskQueue, createTaskWatcher } from "../adapters/nats.ts";
import { createTaskStore } from "../adapters/pg.ts";
import { createApiKeys } from "../domain/api-keys.ts";
import { createApp } from "../http/app.ts";

export interface GatewayTestStack {
  nats: TestNats;
  admin: NatsConnection;
  /** The gateway's own NATS user's connection. */
  gw: NatsConnection;
  jsm: JetStreamManager;
  /** The admin's connection (to set rows up and inspect them); the app has its own (the gateway's role). */
  database: Database;
  /** Answers `Bearer client-a-key`. */
  app: ReturnType<typeof createApp>;
  close(): Promise<void>;
}

export async function startGatewayTestStack(region: string): Promise<GatewayTestStack> {
  let tdb: TestDatabase | undefined;
  let nats: TestNats | undefined;
  [nats, tdb] = await Promise.all([startTestNats({ regions: [region], provision: true }), createTestDatabase(region)]);
  const admin = await connectNats(nats.url, `${region}-admin`, nats.auth("admin"));
  const jsm = await jetstreamManager(admin);
  await ensureStreams(jsm, { region });
  const gw = await connectNats(nats.url, `${region}-gateway`, nats.auth("gateway"));
  const database = openDatabase(tdb.url, { max: 5 });
  // The app's store connects as the gateway's own database role (issue 34), as in production.
  const gatewayDb = openDatabase(tdb.appUrls.gateway, { max: 5, appName: "gateway" });
  const app = createApp({
    config: {
      REGION: region,
      MAX_BODY_BYTES: 64 * 1024,
      IMAGE_MAX_BYTES: 4096,
      MAX_WAIT_SECONDS: 5,
      TASK_DEADLINE_MS: 600_000,
    },
    store: createTaskStore(gatewayDb.db),
    queue: createTaskQueue(gw, region, 2000),
    watcher: createTaskWatcher(gw, region),
    apiKeys: createApiKeys(["client-a-key"]),
    log: createLogger(`${region}-test`, { level: "silent" }),
  });
  return {
    nats,
    admin,
    gw,
    jsm,
    database,
    app,
    async close() {
      await gw.close();
      await admin.close();
      await gatewayDb.close();
      await database.close();
      await Promise.all([nats?.dispose(), tdb?.drop()]);
    },
  };
}
