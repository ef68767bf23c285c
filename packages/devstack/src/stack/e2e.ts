// The single-region stack of the end-to-end and integration tests: `startStack` (stack.ts, the one
// way the project starts its system) with one region, in the shape these tests use: nats-server, a
// Postgres database, the provider emulator (a real HTTP server) and the apps as real OS processes;
// and the clients' helpers (a JSON call, a steady load, what the solvers' logs say about kills).

import type { Emulator, EmulatorOptions } from "@pipeline/emulator";
import type { Database } from "@pipeline/shared/db";
import type { NatsServerHandle } from "../nats-server.ts";
import type { Proc } from "../testing/processes.ts";
import { type StackDatabase, testServers } from "./servers.ts";
import { startStack as startSystem } from "./stack.ts";

export interface E2eStackOptions {
  region?: string;
  emulator?: Partial<EmulatorOptions>;
  solverEnv?: Record<string, string>;
  gatewayEnv?: Record<string, string>;
  solvers?: number;
  /** A Postgres server of the test's own (to restart it); default: the shared test server. */
  pgAdminUrl?: string;
}

export interface E2eStack {
  gatewayUrl: string;
  /** The gateway's metrics listener (`/metrics`, `/readyz`): not on the clients' port. */
  gatewayMetricsUrl: string;
  apiKey: string;
  emu: Emulator;
  nats: NatsServerHandle;
  tdb: StackDatabase;
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

export async function startE2eStack(o: E2eStackOptions = {}): Promise<E2eStack> {
  const apiKey = "e2e-client-key-0001";
  const system = await startSystem({
    regions: [o.region ?? "e2e"],
    servers: testServers({ dbPrefix: () => "e2e", ...(o.pgAdminUrl ? { pgAdminUrl: o.pgAdminUrl } : {}) }),
    ...(o.emulator ? { emulator: o.emulator } : {}),
    apps: { solvers: o.solvers ?? 1 },
    apiKeys: apiKey,
    env: { gateway: o.gatewayEnv ?? {}, solver: { PROVIDER_THREADS: "1000", ...o.solverEnv } },
  });
  const r = system.regions[0]!;
  const stack: E2eStack = {
    gatewayUrl: r.gatewayUrl,
    gatewayMetricsUrl: r.gatewayMetricsUrl!,
    apiKey,
    emu: system.emu!,
    nats: r.nats,
    tdb: r.database,
    db: r.db,
    gateway: r.gateway!,
    solvers: r.solvers,
    async restartGateway() {
      stack.gateway = await r.restartGateway();
      return stack.gateway;
    },
    logDir: system.logDir,
    spawnSolver: (extra) => r.spawnSolver(extra),
    logs: system.logs,
    stop: system.stop,
  };
  return stack;
}

/** A client's own callback signing secret, as the gateway hands it out (`GET /v1/webhook-secret`). */
export async function clientSecret(s: E2eStack, key = s.apiKey): Promise<string> {
  const res = await fetch(`${s.gatewayUrl}/v1/webhook-secret`, { headers: { authorization: `Bearer ${key}` } });
  if (res.status !== 200) throw new Error(`GET /v1/webhook-secret: ${res.status}`);
  return ((await res.json()) as { secret: string }).secret;
}

/** A JSON request to the gateway with the stack's API key. */
export async function api<T = unknown>(
  s: E2eStack,
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
export function steadyLoad(s: E2eStack, prefix: string, n: number, clients: number, pauseMs: number) {
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
export function submitWindowsAtKill(
  s: Pick<E2eStack, "solvers">,
  killed: Proc[],
): { inWindow: number; unanswered: number } {
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
export function submittedTwice(s: E2eStack): string[] {
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
