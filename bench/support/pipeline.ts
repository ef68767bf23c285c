// Our system as real processes, the way tests/harness.ts starts it: a nats-server of its own, a
// fresh database on the bench's Postgres cluster, the provider emulator, the gateway and N solvers.
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { freePort, waitForPort } from "@pipeline/devstack";
import {
  createTestDatabase,
  natsEnv,
  PROVIDER_KEY,
  type Proc,
  spawnApp,
  startTestNats,
  WEBHOOK_SECRET,
} from "@pipeline/devstack/testing";
import type { EmulatorStats } from "@pipeline/emulator";
import { type Database, openDatabase } from "@pipeline/shared/db";
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
  const nats = await startTestNats({ regions: [REGION], provision: true });
  scope.defer("nats-server", () => nats.dispose());
  const tdb = await createTestDatabase("bench", env.pgAdminUrl);
  scope.defer(`database ${tdb.name}`, () => tdb.drop());

  const { proc: emulator, port: emulatorPort, url: emulatorUrl } = await spawnEmulator(scope, logDir, o.emulator);

  const common = { NATS_URL: nats.url, DATABASE_URL: tdb.url, REGION: REGION, LOG_LEVEL: "warn" };
  const gatewayPort = await freePort();
  // Each app with its own database role, as in production (packages/shared/src/db/roles.ts).
  const gateway = spawnApp(
    "gateway",
    o.gatewayScript ?? "apps/gateway/src/main.ts",
    {
      ...common,
      DATABASE_URL: tdb.appUrls.gateway,
      ...natsEnv(nats, "gateway"),
      GATEWAY_PORT: String(gatewayPort),
      API_KEYS: API_KEY,
    },
    logDir,
  );
  scope.defer("gateway", () => stopProc(gateway));

  const solvers: Proc[] = [];
  const spawnSolver = (i: number) => {
    const solverEnv = {
      ...common,
      DATABASE_URL: tdb.appUrls.solver,
      ...natsEnv(nats, "solver"),
      // "solver started" is an info line: the readiness signal.
      LOG_LEVEL: "info",
      WORKER_ID: `bench-solver-${i}`,
      PROVIDER_URL: emulatorUrl,
      PROVIDER_KEY,
      PROVIDER_THREADS: String(o.emulator.threads),
      DRAIN_TIMEOUT_MS: "3000",
      // As `npm run dev` and the tests run it: the callback notifier consumes EVENTS too.
      WEBHOOK_SECRET,
      // Each solver serves metrics on a port of its own (the default, 9464, is one per machine).
      METRICS_PORT: "0",
      ...o.solverEnv,
    };
    const p = spawnApp(`solver-${i}`, "apps/solver/src/main.ts", solverEnv, logDir);
    scope.defer(`solver-${i}`, () => stopProc(p));
    solvers.push(p);
    return p;
  };
  for (let i = 1; i <= o.solvers; i++) spawnSolver(i);

  const db = openDatabase(tdb.url, { max: 4, appName: "bench" });
  scope.defer("bench pool", () => db.close());
  const started = (p: Proc) => waitForLog(p, '"msg":"solver started"', 30_000);
  await Promise.all([waitForPort(emulatorPort, 20_000), waitForPort(gatewayPort, 20_000), ...solvers.map(started)]);

  return {
    gatewayUrl: `http://127.0.0.1:${gatewayPort}`,
    natsUrl: nats.url,
    natsAdmin: nats.auth("admin"),
    databaseUrl: tdb.url,
    db,
    gateway,
    solvers,
    pids: {
      gateway: () => [gateway.pid],
      solvers: () => solvers.map((p) => p.pid),
      nats: () => [nats.pid()].filter((pid): pid is number => pid !== undefined),
      emulator: () => [emulator.pid],
    },
    async startSolver() {
      const p = spawnSolver(solvers.length + 1);
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
export async function submitTask(gatewayUrl: string, i: number, run: string, type?: BenchTaskType): Promise<string> {
  const res = await fetch(`${gatewayUrl}/v1/tasks`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${API_KEY}`,
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
