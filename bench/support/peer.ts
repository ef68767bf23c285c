import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { freePort, waitForPort } from "@pipeline/devstack";
import { createTestDatabase, PROVIDER_KEY, type Proc, spawnApp } from "@pipeline/devstack/testing";
import postgres from "postgres";
import { API_KEY, spawnEmulator } from "./pipeline.ts";
import { stopProc, waitForLog } from "./processes.ts";
import { startRedis } from "./redis-server.ts";
import type { Scope } from "./scope.ts";

/**
 * The fair peer's gateway (bench/baselines/peer-gateway.ts: Hono, Bearer key, zod, one autocommit
 * INSERT, BullMQ `queue.add`, 202) on a free port, taking the bench's API key; stopped with `scope`.
 * Used by end-to-end (with the peer's worker), by ingest (alone, as context) and by startPeer.
 */
export async function startPeerGateway(
  scope: Scope,
  logDir: string,
  o: { redisPort: number; databaseUrl: string; queue: string },
): Promise<{ proc: Proc; url: string }> {
  const port = await freePort();
  const proc = spawnApp(
    "peer-gateway",
    "bench/baselines/peer-gateway.ts",
    {
      REDIS_PORT: String(o.redisPort),
      DATABASE_URL: o.databaseUrl,
      QUEUE: o.queue,
      PORT: String(port),
      API_KEYS: API_KEY,
    },
    logDir,
  );
  scope.defer("peer gateway", () => stopProc(proc));
  await waitForPort(port, 20_000);
  return { proc, url: `http://127.0.0.1:${port}` };
}

/** The fair peer as a whole: its redis-server, emulator, database, worker and gateway. */
export interface PeerSystem {
  gatewayUrl: string;
  emulatorUrl: string;
  /** A small pool of the bench's own on the peer's database (application_name 'bench'). */
  sql: postgres.Sql;
  pids: Record<string, () => number[]>;
  /** Stops the processes that write rows (gateway and worker), before the counts are read. */
  stopWriters(): Promise<void>;
}

/**
 * The fair peer's whole system, as end-to-end's `peerThroughput` starts it (a redis-server of its
 * own, AOF everysec; an emulator of its own; a fresh database on the run's cluster; the worker at
 * `concurrency`, res.php at once then every `pollIntervalMs`; the gateway), with the emulator at
 * `latencyMs`; everything stopped with `scope`. Used by end-to-end and latency.
 */
export async function startPeer(
  scope: Scope,
  env: { pgAdminUrl: string; logDir: string },
  o: { latencyMs: number; threads: number; concurrency: number; pollIntervalMs: number },
): Promise<PeerSystem> {
  const logDir = mkdtempSync(join(env.logDir, "peer-"));
  const redis = await startRedis(scope);
  const tdb = await createTestDatabase("bench", env.pgAdminUrl);
  scope.defer(`database ${tdb.name}`, () => tdb.drop());
  const emulator = await spawnEmulator(scope, logDir, { latencyMs: o.latencyMs, threads: o.threads });
  const worker = spawnApp(
    "peer-worker",
    "bench/baselines/peer-worker.ts",
    {
      REDIS_PORT: String(redis.port),
      DATABASE_URL: tdb.url,
      QUEUE: "peer",
      PROVIDER_URL: emulator.url,
      PROVIDER_KEY,
      POLL_INTERVAL_MS: String(o.pollIntervalMs),
      CONCURRENCY: String(o.concurrency),
    },
    logDir,
  );
  scope.defer("peer worker", () => stopProc(worker));
  const [{ proc: gateway, url }] = await Promise.all([
    startPeerGateway(scope, logDir, { redisPort: redis.port, databaseUrl: tdb.url, queue: "peer" }),
    waitForLog(worker, "worker started"),
    waitForPort(emulator.port, 20_000),
  ]);
  const sql = postgres(tdb.url, { max: 2, onnotice: () => {}, connection: { application_name: "bench" } });
  scope.defer("bench pool", () => sql.end({ timeout: 5 }));
  return {
    gatewayUrl: url,
    emulatorUrl: emulator.url,
    sql,
    pids: {
      gateway: () => [gateway.pid],
      worker: () => [worker.pid],
      redis: () => [redis.pid],
      emulator: () => [emulator.proc.pid],
    },
    stopWriters: async () => void (await Promise.all([stopProc(gateway), stopProc(worker)])),
  };
}
