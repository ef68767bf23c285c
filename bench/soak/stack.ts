// The soak's stack: one region started by @pipeline/devstack/stack's `startStack` (the one way the
// project starts its system): a nats-server, a fresh database (on the tests' Postgres, or a cluster
// of its own when run alone), the provider emulator in this process, the gateway, the solvers and
// the recovery service as real processes. Keeps the list of every process the soak watches,
// incarnations included, and the two ways the soak disturbs them: a solver kill -9 (started again
// at once) and a gateway restart.
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { type RegionStack, type StackHandle, startStack } from "@pipeline/devstack/stack";
import type { Proc } from "@pipeline/devstack/testing";
import { connectNats } from "@pipeline/shared/nats";
import type { Watched } from "./sample.ts";

export const SOAK_API_KEY = "soak-client-key-0001";

export type SoakWatched = Watched & {
  judged: boolean;
  /** A warm-up of its own when longer than the soak's. */
  minWarmupMs?: number;
};

/**
 * nats-server's own warm-up: the inactive_threshold (5 minutes, nats.js's default) of the ordered
 * consumers a KV key listing leaves behind (bench/soak/sample.ts: "expiring"). Until the first of
 * them expire their number, and the server's memory with it, climbs to its steady level.
 */
export const NATS_WARMUP_MS = 5 * 60_000;

export interface SoakStack {
  system: StackHandle;
  region: RegionStack;
  jsm: JetStreamManager;
  watched: SoakWatched[];
  /** Solvers killed so far (their logs tell which kills could have paid twice). */
  killed: Proc[];
  /** kill -9 of the oldest live solver, and a new solver started at once; resolves with the victim's name. */
  killSolver(): Promise<string>;
  /** SIGTERM to the gateway (it drains), then a new one on the same port. */
  restartGateway(): Promise<void>;
  stop(): Promise<void>;
}

/** Solver settings: a killed solver's tasks are taken over within seconds; debug lines name the kill windows. */
const SOLVER_ENV = { LOG_LEVEL: "debug", ACK_WAIT_MS: "5000", LEASE_MS: "5000", DRAIN_TIMEOUT_MS: "3000" };

export async function startSoakStack(o: { solvers: number; now: () => number }): Promise<SoakStack> {
  const system = await startStack({
    regions: ["soak"],
    profile: "dev",
    emulator: { latencyMs: 1000, latencyJitterMs: 2000 },
    apps: { solvers: o.solvers, recovery: true },
    apiKeys: SOAK_API_KEY,
    env: { solver: { PROVIDER_THREADS: "1000", ...SOLVER_ENV } },
  });
  const region = system.regions[0]!;
  const nc = await connectNats(region.nats.url, "soak", region.nats.auth("admin"));
  const watched: SoakWatched[] = [];
  const labels = new Map<string, number>();
  const watch = (name: string, proc: { pid: number; alive(): boolean }, judged = true) => {
    const n = (labels.get(name) ?? 0) + 1;
    labels.set(name, n);
    const w: SoakWatched = {
      label: n > 1 ? `${name} #${n}` : name,
      pid: proc.pid,
      startedAt: o.now(),
      alive: proc.alive,
      judged,
    };
    watched.push(w);
    return w;
  };
  const ofProc = (p: Proc) => ({ pid: p.pid, alive: () => p.exitCode() === undefined });
  const byPid = new Map<number, SoakWatched>();
  for (const p of region.procs) byPid.set(p.pid, watch(p.name, ofProc(p)));
  const natsPid = region.nats.pid();
  if (natsPid)
    watch("nats-server", { pid: natsPid, alive: () => region.nats.pid() === natsPid }).minWarmupMs = NATS_WARMUP_MS;
  watch("soak (client, emulator)", { pid: process.pid, alive: () => true }, false);
  const killed: Proc[] = [];
  return {
    system,
    region,
    jsm: await jetstreamManager(nc),
    watched,
    killed,
    async killSolver() {
      const victim = region.solvers.find((p) => p.exitCode() === undefined)!;
      await victim.kill("SIGKILL");
      byPid.get(victim.pid)!.stoppedAt = o.now();
      killed.push(victim);
      const next = region.spawnSolver();
      byPid.set(next.pid, watch(next.name, ofProc(next)));
      return victim.name;
    },
    async restartGateway() {
      const old = region.gateway!;
      const exited = old.kill("SIGTERM");
      if (await Promise.race([exited.then(() => false), Bun.sleep(20_000).then(() => true)])) await old.kill("SIGKILL");
      byPid.get(old.pid)!.stoppedAt = o.now();
      const next = await region.restartGateway();
      byPid.set(next.pid, watch(next.name, ofProc(next)));
    },
    async stop() {
      await nc.close().catch(() => {});
      await system.stop();
    },
  };
}
