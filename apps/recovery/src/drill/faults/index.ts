import { hostname } from "node:os";
import type { KV } from "@nats-io/kv";
import { latestValidConfig, liveWorkers, SOLVER_CONFIG_KEY } from "@pipeline/shared/runtime";
import { streams } from "@pipeline/shared/subjects";
import { adminStatement, databaseName, renameDatabase, withDatabase } from "../adapters/pg-tools.ts";
import type { RecoveryContext } from "../context.ts";
import { rebuildQueue } from "../queue/rebuild-queue.ts";
import { awaitConvergence, rollbackConfig, rotateKey, type ConfigDeps } from "../runtime/config-ops.ts";
import { restoreSnapshot } from "../snapshot/restore.ts";
import { takeSnapshot } from "../snapshot/take-snapshot.ts";
import { recoverStale } from "../sweep/recover-stale.ts";
import type { Scenario } from "./scenarios.ts";
import { checkVictim, readProc } from "./victim.ts";

export class DrillError extends Error {
  override name = "DrillError";
}

export interface FaultDeps {
  ctx: RecoveryContext;
  configKv: KV;
  workersKv: KV;
  actor: string;
  databaseUrl: string;
  snapshotDir: string;
  snapshotKeep: number;
  gatewayGraceMs: number;
  /** key-compromise: the key name to rotate to. */
  keyTo?: string;
  /** A step of the drill, in the order it happened (printed in the report). */
  step(what: string): void;
}

/** One scenario: checks before the load starts, then the fault and the runbook's remedy. */
export interface Fault {
  /** Runs before the baseline (a snapshot for db-loss; refuses when the drill cannot run). */
  prepare(): Promise<void>;
  /** Injects the fault, then applies the runbook's command(s). Resolves once the remedy is applied. */
  inject(): Promise<Record<string, unknown>>;
}

export function faultFor(scenario: Scenario, d: FaultDeps): Fault {
  const config: ConfigDeps = { config: d.configKv, workers: d.workersKv, db: d.ctx.database.db, actor: d.actor };
  switch (scenario) {
    case "worker-crash":
      return {
        async prepare() {
          const { workers } = await liveWorkers(d.workersKv);
          if (!workers.some((w) => w.host === hostname())) throw new DrillError(`no live solver on this host (${hostname()}) to kill: the drill kills a local process`);
        },
        async inject() {
          const { workers } = await liveWorkers(d.workersKv);
          const here = workers.filter((w) => w.host === hostname()).sort((a, b) => b.inFlight - a.inFlight);
          const victim = here[0];
          if (!victim) throw new DrillError("no live solver on this host to kill");
          // The pid comes from KV: kill it only if it is a solver of this region (victim.ts).
          const check = checkVictim(victim.pid, d.ctx.region, victim.startedAt, readProc(victim.pid));
          if (!check.ok) throw new DrillError(`refusing to kill ${victim.workerId}: ${check.why}`);
          process.kill(victim.pid, "SIGKILL");
          d.step(`kill -9 ${victim.workerId} (pid ${victim.pid}, ${victim.inFlight} in flight); ${workers.length - 1} other solver(s) alive`);
          if (workers.length === 1) d.step("no other solver: recovery waits for the supervisor to restart one");
          // The runbook's remedy is the fleet's own: the victim's leases run out, its messages are
          // redelivered and taken over (the provider ids are resumed, never resubmitted).
          return { victim: victim.workerId, pid: victim.pid, inFlightAtKill: victim.inFlight, survivors: workers.length - 1 };
        },
      };
    case "queue-loss":
      return {
        async prepare() {},
        async inject() {
          const name = streams.tasks(d.ctx.region);
          await d.ctx.jsm.streams.delete(name);
          d.step(`${name} deleted (messages and consumers with it)`);
          const r = await rebuildQueue(d.ctx, { gatewayGraceMs: d.gatewayGraceMs });
          d.step(`rebuild-queue: ${r.open} unfinished task(s), ${r.republished} re-published, ${r.withMessage} already had a message (${r.ms} ms)`);
          return { republished: r.republished, open: r.open, rebuildMs: r.ms };
        },
      };
    case "db-loss": {
      let snapshot: Awaited<ReturnType<typeof takeSnapshot>> | undefined;
      return {
        async prepare() {
          snapshot = await takeSnapshot({ databaseUrl: d.databaseUrl, dir: d.snapshotDir, keep: d.snapshotKeep, region: d.ctx.region, jsm: d.ctx.jsm });
          d.step(`snapshot ${snapshot.manifest.name} taken (EVENTS seq ${snapshot.manifest.events.lastSeq}); tasks accepted after it come back from EVENTS`);
        },
        async inject() {
          const name = databaseName(d.databaseUrl);
          const admin = withDatabase(d.databaseUrl, "postgres");
          await adminStatement(admin, "drop", name);
          d.step(`database ${name} dropped`);
          // Restore into a new database; the apps see it under their name only once the replay
          // is complete (a solver must never read a half-replayed row).
          const scratch = `${name}_restoring`;
          await adminStatement(admin, "drop", scratch);
          await adminStatement(admin, "create", scratch);
          const r = await restoreSnapshot({ snapshot: snapshot!, intoUrl: withDatabase(d.databaseUrl, scratch), nats: { js: d.ctx.js, jsm: d.ctx.jsm } });
          await renameDatabase(admin, scratch, name);
          d.step(`restore ${r.restoreMs} ms + replay of ${r.replay?.events ?? 0} events; renamed to ${name}`);
          const sweep = await recoverStale(d.ctx, { staleAfterMs: 5000 });
          d.step(`recover-stale: ${sweep.republished} re-published`);
          return { snapshot: r.snapshot, restoreMs: r.restoreMs, replayedEvents: r.replay?.events ?? 0, republished: sweep.republished };
        },
      };
    }
    case "key-compromise":
      return {
        async prepare() {
          if (!d.keyTo) throw new DrillError("key-compromise needs --to <key name>: the spare key the solvers' key file holds");
        },
        async inject() {
          const r = await rotateKey(config, d.keyTo!, { reason: "drill: key compromised", waitMs: 20_000 });
          d.step(`rotate-key ${r.from ?? "?"} -> ${d.keyTo}: revision ${r.revision}, applied by ${r.applied.length}/${r.workers.length} solver(s) in ${r.ms} ms`);
          if (r.refused.length || r.pending.length) throw new DrillError(`solvers did not switch: refused ${JSON.stringify(r.refused)}, silent ${JSON.stringify(r.pending)}`);
          return { from: r.from, to: d.keyTo, revision: r.revision, convergedMs: r.ms, keyRefs: [...new Set(r.workers.map((w) => w.keyRef))] };
        },
      };
    case "config-corruption":
      return {
        async prepare() {},
        async inject() {
          // A bad write straight into the bucket (as a broken script would do): not JSON at all.
          const revision = await d.configKv.put(SOLVER_CONFIG_KEY, "{ providerKey: oops, pollIntervalMs: -1");
          d.step(`corrupt config written as revision ${revision}`);
          const seen = await awaitConvergence(d.workersKv, revision, 10_000);
          d.step(`solvers: ${seen.refused.length} refused it, ${seen.applied.length} applied it, ${seen.pending.length} silent (${seen.ms} ms)`);
          if (seen.applied.length) throw new DrillError(`solvers applied a corrupt config: ${seen.applied.join(", ")}`);
          if (!(await latestValidConfig(d.configKv))) {
            await d.configKv.purge(SOLVER_CONFIG_KEY);
            d.step("no valid revision to roll back to: the corrupt one is purged; the solvers keep their environment's config");
            return { corruptRevision: revision, refusedBy: seen.refused.map((r) => r.workerId), rolledBackTo: null };
          }
          const rb = await rollbackConfig(config, undefined, "drill: config corruption");
          const after = await awaitConvergence(d.workersKv, rb.revision, 10_000);
          d.step(`config rollback: revision ${rb.restored} restored as ${rb.revision}, applied by ${after.applied.length}/${after.workers.length}`);
          return { corruptRevision: revision, refusedBy: seen.refused.map((r) => r.workerId), rolledBackTo: rb.restored, revision: rb.revision };
        },
      };
  }
}
