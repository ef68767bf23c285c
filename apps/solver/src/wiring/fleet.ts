// This solver among its peers: its heartbeat in `workers_<region>` (what the registry, `recovery
// workers` and the rollout's gate read), and the dead-peer reaper: a solver killed -9 has its leases
// and provider slots released within DEAD_AFTER_MS plus one round, instead of its LEASE_MS/
// ACK_WAIT_MS; sooner (one missed beat plus one round) when its Postgres sessions are gone too
// (adapters/reaper.ts).
import { hostname } from "node:os";
import type { JetStreamClient } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import type { Database } from "@pipeline/shared/db";
import type { GroupOf } from "@pipeline/shared/fair-share";
import {
  HEARTBEAT_EVERY_MS,
  type Heartbeat,
  StaleViewError,
  type WorkersView,
  watchWorkers,
  workerNameOf,
} from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";
import { startHeartbeat } from "../adapters/heartbeat.ts";
import type { LiveConfig } from "../adapters/live-config.ts";
import { reapDeadWorkers } from "../adapters/reaper.ts";
import type { SolverConfig } from "../config.ts";
import type { KeyRing } from "../domain/keyring.ts";
import type { Tally } from "./parts.ts";

export function startSolverHeartbeat(d: {
  kv: KV;
  config: SolverConfig;
  workerId: string;
  keyRing: KeyRing;
  liveConfig: LiveConfig;
  inFlight: () => number;
  tally: Tally;
  /** The adaptive window's limits (ADAPTIVE_CONCURRENCY=1): in the beat, for `recovery assess`. */
  concurrencyLimits?: () => Record<string, { limit: number; plan: number; held: number }>;
  log: Logger;
}) {
  const startedAt = new Date().toISOString();
  const beat = (): Omit<Heartbeat, "at"> => {
    const key = d.keyRing.current();
    const st = d.liveConfig.status();
    return {
      workerId: d.workerId,
      name: workerNameOf(d.workerId),
      pid: process.pid,
      host: hostname(),
      version: d.config.SOLVER_VERSION,
      startedAt,
      inFlight: d.inFlight(),
      keyName: key.name,
      keyRef: key.ref,
      breaker: d.keyRing.breaker(key.ref).state(),
      configRevision: st.revision,
      configRejected: st.rejected,
      tally: { ...d.tally },
      ...(d.concurrencyLimits ? { concurrencyLimits: d.concurrencyLimits() } : {}),
    };
  };
  return startHeartbeat(d.kv, beat, d.log);
}

export function startReaper(d: {
  config: SolverConfig;
  database: Database;
  js: JetStreamClient;
  kv: KV;
  workerId: string;
  /** The fair-share groups in use: a dead solver's tasks go back on their owners' groups' subjects. */
  groupOf?: GroupOf;
  log: Logger;
}): { stop(): void } {
  const { config } = d;
  if (config.DEAD_AFTER_MS <= 0) return { stop() {} };
  // One watch on the bucket for the process's life (kv/workers-view.ts), not a listing per round.
  // A copy whose own beat is two beats and a second old is refused: nobody is declared dead from it.
  let view: WorkersView | undefined;
  let stopped = false;
  void watchWorkers(d.kv, { self: d.workerId, staleAfterMs: 2 * HEARTBEAT_EVERY_MS + 1000 })
    .then((v) => (stopped ? v.stop() : (view = v)))
    .catch((err: Error) => d.log.warn({ err: err.message }, "workers watch not started; the reaper lists the bucket"));
  let reaping = false;
  let stale = false;
  const round = () => {
    if (reaping) return;
    reaping = true;
    reapDeadWorkers({
      sql: d.database.db.$client,
      js: d.js,
      workers: d.kv,
      view,
      region: config.REGION,
      deadAfterMs: config.DEAD_AFTER_MS,
      self: d.workerId,
      // Killed -9: its sessions (named as the solver's pools) are gone, so it is dead after one missed beat.
      sessionName: (id) => `solver-${id}`,
      sessionsGoneAfterMs: Math.min(config.DEAD_AFTER_MS, HEARTBEAT_EVERY_MS + 1000),
      ...(d.groupOf ? { groupOf: d.groupOf } : {}),
    })
      .then((r) => {
        if (stale) d.log.info("workers view current again; dead-worker checks resumed");
        stale = false;
        if (r.dead.length)
          d.log.warn(r, "dead solvers: their task leases and provider slots released, their tasks queued again");
      })
      .catch((err: Error) => {
        // A stale view repeats every round while NATS is away: said once, until it is current again.
        if (err instanceof StaleViewError) {
          if (!stale) d.log.warn({ err: err.message }, "dead-worker checks paused");
          stale = true;
        } else d.log.warn({ err: err.message }, "dead-worker check failed");
      })
      .finally(() => (reaping = false));
  };
  const timer = setInterval(round, config.REAP_INTERVAL_MS + Math.floor(Math.random() * 500));
  return {
    stop: () => {
      stopped = true;
      clearInterval(timer);
      view?.stop();
    },
  };
}
