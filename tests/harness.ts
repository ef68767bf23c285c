// Starts the real system for end-to-end tests: nats-server, a Postgres database, the provider
// emulator (a real HTTP server) and the apps as real OS processes (`bun apps/<app>/src/main.ts`).
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, natsEnv, waitForPort } from "@pipeline/devstack";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { createEmulator, type Emulator, type EmulatorOptions } from "@pipeline/emulator";
import { type Database, openDatabase } from "@pipeline/shared/db";

// The process starter lives in @pipeline/devstack/testing (the benchmarks use it too).
export { PROVIDER_KEY, type Proc, ROOT, spawnApp, WEBHOOK_SECRET } from "@pipeline/devstack/testing";

import { PROVIDER_KEY, type Proc, ROOT, spawnApp, WEBHOOK_SECRET } from "@pipeline/devstack/testing";

export interface StackOptions {
  region?: string;
  emulator?: EmulatorOptions;
  solverEnv?: Record<string, string>;
  gatewayEnv?: Record<string, string>;
  solvers?: number;
  /** A Postgres server of the test's own (to restart it); default: the shared test server. */
  pgAdminUrl?: string;
}

export interface Stack {
  gatewayUrl: string;
  /** The gateway's metrics listener (`/metrics`, `/readyz`): not on the clients' port. */
  gatewayMetricsUrl: string;
  apiKey: string;
  emu: Emulator;
  nats: TestNats;
  tdb: TestDatabase;
  db: Database;
  gateway: Proc;
  solvers: Proc[];
  /** Starts a new gateway process on the same port (after a kill). */
  restartGateway(): Promise<Proc>;
  logDir: string;
  spawnSolver(extraEnv?: Record<string, string>): Proc;
  /** Every log line written by the apps so far. */
  logs(): string;
  stop(): Promise<void>;
}

export async function startStack(o: StackOptions = {}): Promise<Stack> {
  const region = o.region ?? "e2e";
  const logDir = mkdtempSync(join(tmpdir(), "pipeline-e2e-"));
  const [nats, tdb] = await Promise.all([
    startTestNats({ regions: [region], provision: true }),
    createTestDatabase("e2e", o.pgAdminUrl),
  ]);
  const emu = createEmulator({ port: 0, keys: { [PROVIDER_KEY]: { threads: 1000 } }, latencyMs: 0, ...o.emulator });
  await emu.start();
  const apiKey = "e2e-client-key-0001";
  const common = { NATS_URL: nats.url, DATABASE_URL: tdb.url, REGION: region, LOG_LEVEL: "info" };
  const [gatewayPort, gatewayMetricsPort] = await Promise.all([freePort(), freePort()]);
  // Tests receive callbacks on http://127.0.0.1: the SSRF policy is loosened for them (docs/security.md).
  const devCallbacks = { WEBHOOK_ALLOW_HTTP: "1", WEBHOOK_ALLOW_PRIVATE: "1" };
  // Each app logs in with its own database role (issue 34: packages/shared/src/db/roles.ts), so every
  // test that starts the stack runs the apps' queries with their grants only; `db` below is the admin's.
  const gatewayEnv = {
    ...common,
    DATABASE_URL: tdb.appUrls.gateway,
    ...natsEnv(nats, "gateway"),
    ...devCallbacks,
    GATEWAY_PORT: String(gatewayPort),
    GATEWAY_METRICS_PORT: String(gatewayMetricsPort),
    API_KEYS: apiKey,
    WEBHOOK_SECRET,
    ...o.gatewayEnv,
  };
  let gateway = spawnApp("gateway", "apps/gateway/src/main.ts", gatewayEnv, logDir);
  const gateways = [gateway];
  let solverN = 0;
  const solverEnv = {
    ...common,
    DATABASE_URL: tdb.appUrls.solver,
    ...natsEnv(nats, "solver"),
    PROVIDER_URL: emu.url,
    PROVIDER_KEY,
    FIRST_POLL_MS: "50",
    POLL_INTERVAL_MS: "100",
    RETRY_BASE_MS: "100",
    RETRY_MAX_MS: "1000",
    PROVIDER_THREADS: "1000",
    METRICS_PORT: "0",
    WEBHOOK_SECRET,
    WEBHOOK_RETRY_BASE_MS: "100",
    WEBHOOK_RETRY_MAX_MS: "1000",
    ...devCallbacks,
    ...o.solverEnv,
  };
  const solvers: Proc[] = [];
  const spawnSolver = (extra: Record<string, string> = {}) => {
    const p = spawnApp(
      `solver-${++solverN}`,
      "apps/solver/src/main.ts",
      { ...solverEnv, WORKER_ID: `solver-${solverN}`, ...extra },
      logDir,
    );
    solvers.push(p);
    return p;
  };
  for (let i = 0; i < (o.solvers ?? 1); i++) spawnSolver();
  await waitForPort(gatewayPort, 20_000);
  const db = openDatabase(tdb.url, { max: 5 });
  const logs = () =>
    [...new Set([...gateways, ...solvers].map((p) => p.logFile))].map((f) => readFileSync(f, "utf8")).join("\n");
  const stack: Stack = {
    gatewayUrl: `http://127.0.0.1:${gatewayPort}`,
    gatewayMetricsUrl: `http://127.0.0.1:${gatewayMetricsPort}`,
    apiKey,
    emu,
    nats,
    tdb,
    db,
    gateway,
    solvers,
    async restartGateway() {
      gateway = spawnApp("gateway", "apps/gateway/src/main.ts", gatewayEnv, logDir);
      gateways.push(gateway);
      stack.gateway = gateway;
      await waitForPort(gatewayPort, 20_000);
      return gateway;
    },
    logDir,
    spawnSolver,
    logs,
    async stop() {
      await Promise.all([...gateways, ...solvers].map((p) => p.kill("SIGTERM")));
      await db.close();
      await emu.stop();
      await Promise.all([nats.dispose(), tdb.drop()]);
    },
  };
  return stack;
}

/** A client's own callback signing secret, as the gateway hands it out (`GET /v1/webhook-secret`). */
export async function clientSecret(s: Stack, key = s.apiKey): Promise<string> {
  const res = await fetch(`${s.gatewayUrl}/v1/webhook-secret`, { headers: { authorization: `Bearer ${key}` } });
  if (res.status !== 200) throw new Error(`GET /v1/webhook-secret: ${res.status}`);
  return ((await res.json()) as { secret: string }).secret;
}

/** A JSON request to the gateway with the stack's API key. */
export async function api<T = unknown>(
  s: Stack,
  path: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: T }> {
  const res = await fetch(`${s.gatewayUrl}${path}`, {
    method: init.method ?? "GET",
    headers: {
      authorization: `Bearer ${s.apiKey}`,
      ...(init.body ? { "content-type": "application/json" } : {}),
      ...init.headers,
    },
    ...(init.body ? { body: JSON.stringify(init.body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as T };
}

/** A steady load: `clients` clients submit with Idempotency-Keys and retry through outages, as real clients do. */
export function steadyLoad(s: Stack, prefix: string, n: number, clients: number, pauseMs: number) {
  const acked: Array<{ id: string; at: number }> = [];
  let next = 0;
  const done = Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < n) {
        const i = next++;
        for (let tries = 0; ; tries++) {
          const r = await api<{ id: string }>(s, "/v1/tasks", {
            method: "POST",
            body: {
              type: "turnstile",
              params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/${prefix}/${i}` },
            },
            headers: { "idempotency-key": `${prefix}-${i}` },
          }).catch(() => ({ status: 0, body: { id: "" } }));
          if (r.status === 202) {
            acked.push({ id: r.body.id, at: Date.now() });
            break;
          }
          if (tries > 600) throw new Error(`submit ${prefix}-${i} kept failing (${r.status})`);
          await Bun.sleep(100);
        }
        await Bun.sleep(pauseMs);
      }
    }),
  );
  return { acked, done };
}

/**
 * How many extra provider submissions a set of kill -9s may explain, from the solvers' own logs
 * (LOG_LEVEL debug): a killed solver whose last word on a task was "provider submit" died between
 * sending in.php and checkpointing the provider id (the one window where a kill can pay twice);
 * plus every "provider submit unanswered" (a timed-out in.php may have created a task). Anything
 * above this is a submission the checkpoint should have prevented.
 */
export function submitWindowsAtKill(s: Stack, killed: Proc[]): { inWindow: number; unanswered: number } {
  let inWindow = 0;
  let unanswered = 0;
  const lines = (p: Proc) =>
    p
      .log()
      .split("\n")
      .filter((t) => t.startsWith("{"))
      .map((t) => {
        try {
          return JSON.parse(t) as Record<string, unknown>;
        } catch {
          return undefined;
        }
      })
      .filter((l): l is Record<string, unknown> => !!l);
  for (const p of killed) {
    const last = new Map<string, string>();
    for (const l of lines(p)) if (typeof l.taskId === "string") last.set(l.taskId, String(l.msg));
    for (const msg of last.values()) if (msg === "provider submit") inWindow++;
  }
  for (const p of s.solvers)
    for (const l of lines(p)) if (l.msg === "provider submit unanswered; the retry may pay twice") unanswered++;
  return { inWindow, unanswered };
}

/**
 * The solvers' own account of every task the provider saw more than once: each log line that
 * names the task (submits, checkpoints, retries, kills in between), oldest first. Needs the
 * solvers' LOG_LEVEL at debug ("provider submit" is a debug line).
 */
export function submittedTwice(s: Stack): string[] {
  const byTask = new Map<string, { file: string; line: Record<string, unknown> }[]>();
  for (const p of s.solvers) {
    for (const text of p.log().split("\n")) {
      if (!text.startsWith("{")) continue;
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(text) as Record<string, unknown>;
      } catch {
        continue;
      }
      if (typeof line.taskId !== "string") continue;
      const list = byTask.get(line.taskId) ?? [];
      list.push({ file: p.logFile.split("/").pop()!, line });
      byTask.set(line.taskId, list);
    }
  }
  const out: string[] = [];
  for (const [taskId, lines] of byTask) {
    if (lines.filter((l) => l.line.msg === "provider submit").length < 2) continue;
    const at = (l: { line: Record<string, unknown> }) => Date.parse(String(l.line.time));
    lines.sort((a, b) => at(a) - at(b));
    out.push(
      `${taskId}:\n${lines.map((l) => `  ${String(l.line.time).slice(11, 23)} ${l.file} ${l.line.msg} ${JSON.stringify({ ...l.line, msg: undefined, time: undefined, taskId: undefined, level: undefined, pid: undefined, hostname: undefined, service: undefined })}`).join("\n")}`,
    );
  }
  return out;
}
