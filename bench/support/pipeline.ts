// Our system as real processes, started by @pipeline/devstack/stack's `startStack` (the one way the
// project starts its system; the bench profile: few log lines): a nats-server of its own, a fresh
// database on the bench's Postgres cluster, the provider emulator as its own process (its CPU is
// counted apart), the gateway and N solvers.
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { freePort, waitForPort } from "@pipeline/devstack";
import { startStack, testServers } from "@pipeline/devstack/stack";
import { PROVIDER_KEY, type Proc, spawnApp } from "@pipeline/devstack/testing";
import type { EmulatorStats } from "@pipeline/emulator";
import type { Database } from "@pipeline/shared/db";
import type { NatsAuth } from "@pipeline/shared/nats";
import { stopProc, waitForLog } from "./processes.ts";
import type { Scope } from "./scope.ts";

export const API_KEY = "bench-client-key-0001";
const REGION = "bench";

export interface PipelineOptions {
  /** Solver processes to start (0: the gateway alone). */
  solvers: number;
  solverEnv?: Record<string, string>;
  /** Another checkout's gateway (an absolute path to its main.ts): bench/ab-ingest.ts compares two. */
  gatewayScript?: string;
  /** Provider latency and the key's thread limit. */
  emulator: { latencyMs: number; threads: number };
  /** API_KEYS (comma-separated); default API_KEY alone. */
  apiKeys?: string;
}

export interface Pipeline {
  gatewayUrl: string;
  natsUrl: string;
  /** The nats-server's admin credentials (for the bench's own connections). */
  natsAdmin: NatsAuth;
  databaseUrl: string;
  /** A small pool of the bench's own on the pipeline's database. */
  db: Database;
  gateway: Proc;
  solvers: Proc[];
  /** Process ids by part, for CPU accounting (solvers: those started so far). */
  pids: { gateway: () => number[]; solvers: () => number[]; nats: () => number[]; emulator: () => number[] };
  /** Starts one more solver process; resolves once it has logged "solver started". */
  startSolver(): Promise<Proc>;
  emulatorUrl: string;
  emulatorStats(): Promise<EmulatorStats>;
  resetEmulatorStats(): Promise<void>;
}

/**
 * Starts the pipeline; everything is registered in `scope` as soon as it runs. Resolves once
 * the gateway listens and every solver has logged "solver started" (its consumers exist).
 */
export async function startPipeline(
  scope: Scope,
  env: { pgAdminUrl: string; logDir: string },
  o: PipelineOptions,
): Promise<Pipeline> {
  const logDir = mkdtempSync(join(env.logDir, "pipeline-"));
  const { proc: emulator, port: emulatorPort, url: emulatorUrl } = await spawnEmulator(scope, logDir, o.emulator);
  const gatewayScript = "apps/gateway/src/main.ts";
  const system = await startStack({
    regions: [REGION],
    profile: "bench",
    servers: testServers({ pgAdminUrl: env.pgAdminUrl, dbPrefix: () => "bench" }),
    logDir,
    // Another checkout's gateway in place of ours (bench/ab-ingest.ts).
    launcher: (name, script, e) =>
      spawnApp(name, script === gatewayScript && o.gatewayScript ? o.gatewayScript : script, e, logDir),
    provider: { url: emulatorUrl, key: PROVIDER_KEY },
    apps: { solvers: o.solvers },
    apiKeys: o.apiKeys ?? API_KEY,
    workerId: (_, n) => `bench-solver-${n}`,
    env: { solver: { PROVIDER_THREADS: String(o.emulator.threads), ...o.solverEnv } },
  });
  scope.defer("pipeline", () => system.stop());
  const r = system.regions[0]!;
  const started = (p: Proc) => waitForLog(p, '"msg":"solver started"', 30_000);
  await Promise.all([waitForPort(emulatorPort, 20_000), ...r.solvers.map(started)]);
  return {
    gatewayUrl: r.gatewayUrl,
    natsUrl: r.nats.url,
    natsAdmin: r.nats.auth("admin"),
    databaseUrl: r.database.url,
    db: r.db,
    gateway: r.gateway!,
    solvers: r.solvers,
    pids: {
      gateway: () => [r.gateway!.pid],
      solvers: () => r.solvers.map((p) => p.pid),
      nats: () => [r.nats.pid()].filter((pid): pid is number => pid !== undefined),
      emulator: () => [emulator.pid],
    },
    async startSolver() {
      const p = r.spawnSolver();
      await started(p);
      return p;
    },
    emulatorUrl,
    async emulatorStats() {
      const res = await fetch(`${emulatorUrl}/emulator/stats`);
      return (await res.json()) as EmulatorStats;
    },
    async resetEmulatorStats() {
      // Forgets the warm-up's provider tasks too: the counters then cover only what follows.
      await fetch(`${emulatorUrl}/emulator/reset`, { method: "POST" });
    },
  };
}

/** The provider emulator as its own process (key PROVIDER_KEY with `threads`); not yet listening when this resolves. */
export async function spawnEmulator(
  scope: Scope,
  logDir: string,
  o: { latencyMs: number; threads: number },
): Promise<{ proc: Proc; port: number; url: string }> {
  const port = await freePort();
  const proc = spawnApp(
    "emulator",
    "packages/emulator/src/main.ts",
    {
      EMULATOR_PORT: String(port),
      EMULATOR_KEYS: `${PROVIDER_KEY}:${o.threads}:1000000`,
      EMULATOR_LATENCY_MS: String(o.latencyMs),
    },
    logDir,
  );
  scope.defer("emulator", () => stopProc(proc));
  return { proc, port, url: `http://127.0.0.1:${port}` };
}

/** The body of task number i: a turnstile task whose page URL (so provider fingerprint) is its own. */
/** The task types the benchmarks submit (turnstile unless a benchmark says otherwise). */
export type BenchTaskType = "turnstile" | "recaptcha_v2";

export function taskBody(i: number, run: string, type: BenchTaskType = "turnstile"): string {
  const pageurl = `https://bench.example.com/${run}/${i}`;
  return JSON.stringify(
    type === "turnstile"
      ? { type, params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl } }
      : { type, params: { sitekey: "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", pageurl } },
  );
}

/** One durable submission through the gateway (with an Idempotency-Key, as a careful client sends); throws unless 202. */
export async function submitTask(
  gatewayUrl: string,
  i: number,
  run: string,
  type?: BenchTaskType,
  apiKey = API_KEY,
): Promise<string> {
  const res = await fetch(`${gatewayUrl}/v1/tasks`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${apiKey}`,
      "content-type": "application/json",
      "idempotency-key": `${run}-${i}`,
    },
    body: taskBody(i, run, type),
  });
  const body = (await res.json()) as { id?: string };
  if (res.status !== 202 || !body.id)
    throw new Error(`POST /v1/tasks answered ${res.status}: ${JSON.stringify(body).slice(0, 200)}`);
  return body.id;
}
