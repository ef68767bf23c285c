import { freePort, waitForPort } from "@pipeline/devstack";
import { type Proc, spawnApp } from "@pipeline/devstack/testing";
import { API_KEY } from "./pipeline.ts";
import { stopProc } from "./processes.ts";
import type { Scope } from "./scope.ts";

/**
 * The fair peer's gateway (bench/baselines/peer-gateway.ts: Hono, Bearer key, zod, one autocommit
 * INSERT, BullMQ `queue.add`, 202) on a free port, taking the bench's API key; stopped with `scope`.
 * Used by end-to-end (with the peer's worker) and by ingest (alone, as context).
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
