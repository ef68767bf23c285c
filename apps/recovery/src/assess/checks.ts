// The verdicts of `assess`: pure functions from what the probes read (probes.ts) to check lines.
// `fail` means a human is needed; `warn`, look when you can.
import type { Heartbeat } from "@pipeline/shared/kv";
import { MIN_NATS_SERVER, versionAtLeast } from "@pipeline/shared/nats";
import type { Assessment, Check, Level } from "./model.ts";
import type { JetStreamProbe, PostgresProbe, SnapshotsProbe } from "./probes.ts";

/** The NATS server the CLI is connected to: warn below the version the project relies on. */
export function natsServerCheck(server: { version: string; url: string }): Check {
  return versionAtLeast(server.version, MIN_NATS_SERVER)
    ? { name: "nats", level: "ok", summary: `nats-server ${server.version} at ${server.url}` }
    : {
        name: "nats",
        level: "warn",
        summary: `nats-server ${server.version} at ${server.url}: older than ${MIN_NATS_SERVER}`,
        hint: "upgrade the server (docs/nats.md): the project relies on 2.14's WorkQueue sourcing and +TERM reasons",
      };
}

/** TASKS: lost (fail), no consumer (fail with messages, else warn), a lane nobody pulls (fail), or the lag per lane. */
export function queueCheck(q: NonNullable<Assessment["queue"]>): Check {
  if (!q.exists)
    return {
      name: "queue",
      level: "fail",
      summary: `${q.stream} does not exist: queue lost`,
      hint: "bun run recovery rebuild-queue, then restart the solvers (they recreate their consumers)",
    };
  const idle = q.lanes.filter((l) => l.pending > 0 && l.ackPending === 0 && l.waitingPulls === 0);
  if (q.lanes.length === 0)
    return {
      name: "queue",
      level: q.messages > 0 ? "fail" : "warn",
      summary: `${q.stream}: ${q.messages} messages, no consumer`,
      hint: "start a solver",
    };
  if (idle.length)
    return {
      name: "queue",
      level: "fail",
      summary: `nobody pulls ${idle.map((l) => `${l.consumer} (${l.pending} waiting)`).join(", ")}`,
      hint: "start or restart a solver; check its log",
    };
  return {
    name: "queue",
    level: "ok",
    summary: `${q.messages} messages; lag ${q.lanes.map((l) => `${l.consumer.split("_")[2] ?? l.consumer}=${l.pending}`).join(" ")}`,
  };
}

/** The DLQ: warn when anything is dead-lettered. */
export function dlqCheck(dlq: NonNullable<Assessment["dlq"]>): Check {
  return dlq.messages > 0
    ? {
        name: "dlq",
        level: "warn",
        summary: `${dlq.messages} dead-lettered`,
        hint: `nats stream view ${dlq.stream}; fix the cause, then POST /v1/tasks/:id/retry`,
      }
    : { name: "dlq", level: "ok", summary: "empty" };
}

/** The last breaker event: a warning when it opened; nothing otherwise. */
export function breakerCheck(b: NonNullable<Assessment["breaker"]>): Check | undefined {
  if (b.state !== "open") return undefined;
  return {
    name: "breaker",
    level: "warn",
    summary: `last breaker event: open (${b.reason ?? "?"}) on ${b.worker ?? "?"} at ${b.at}`,
    hint: "key-level code: fix the key or account; error rate: the provider is down",
  };
}

/** NATS: unreachable (fail), else the server version, queue, DLQ, breaker, and a JetStream error (fail). */
export function natsChecks(p: JetStreamProbe | Error, server?: { version: string; url: string }): Check[] {
  if (p instanceof Error)
    return [
      {
        name: "nats",
        level: "fail",
        summary: `NATS unreachable: ${p.message}`,
        hint: "start nats-server; the apps reconnect by themselves",
      },
    ];
  const out: Check[] = [];
  if (server) out.push(natsServerCheck(server));
  if (p.queue) out.push(queueCheck(p.queue));
  if (p.dlq) out.push(dlqCheck(p.dlq));
  const breaker = p.breaker && breakerCheck(p.breaker);
  if (breaker) out.push(breaker);
  if (p.error !== null) out.push({ name: "queue", level: "fail", summary: `JetStream error: ${p.error}` });
  return out;
}

/** Postgres: unreachable or a failed query (fail); else tasks by state, stuck solving rows, stale queued ones. */
export function postgresChecks(p: PostgresProbe | Error, staleAfterMs: number): Check[] {
  if (p instanceof Error)
    return [
      {
        name: "postgres",
        level: "fail",
        summary: `Postgres unreachable: ${p.message}`,
        hint: "start Postgres, or restore the newest snapshot (docs/runbook.md)",
      },
    ];
  const out: Check[] = [];
  if (p.server) out.push({ name: "postgres", level: "ok", summary: `PostgreSQL ${p.server.version ?? "?"} reachable` });
  const t = p.tasks;
  if (t) {
    out.push({
      name: "tasks",
      level: "ok",
      summary:
        Object.entries(t.byState)
          .map(([k, v]) => `${k}=${v}`)
          .join(" ") || "none",
    });
    if (t.stuckSolving > 0)
      out.push({
        name: "stuck",
        level: p.stuckOld > 0 ? "fail" : "warn",
        summary: `${t.stuckSolving} solving with an expired lease (oldest updated ${Math.round(t.oldestStuckSolvingSec ?? 0)} s ago)`,
        hint: "their messages are redelivered after AckWait; if they stay: bun run recovery recover-stale",
      });
    if (t.staleQueued > 0)
      out.push({
        name: "stale",
        level: "warn",
        summary: `${t.staleQueued} queued/retrying not updated for ${Math.round(staleAfterMs / 1000)} s (oldest queued ${Math.round(t.oldestQueuedSec ?? 0)} s)`,
        hint: "a backlog, or lost messages: bun run recovery recover-stale re-publishes only those without a message",
      });
  }
  if (p.error !== null)
    out.push({
      name: "postgres",
      level: "fail",
      summary: `query failed: ${p.error}`,
      hint: "a missing tasks table means database loss: restore the newest snapshot",
    });
  return out;
}

/** The newest snapshot's name and age, or null when there is none. */
export function newestSnapshot(p: SnapshotsProbe): Assessment["snapshot"] {
  const snap = p.snapshots[0];
  return snap
    ? { name: snap.manifest.name, ageSec: Math.round((p.now - Date.parse(snap.manifest.createdAt)) / 1000) }
    : null;
}

/** The newest snapshot: none (warn), older than `maxAgeMs` (fail), else its age. */
export function snapshotCheck(p: SnapshotsProbe, maxAgeMs: number): Check {
  const snap = p.snapshots[0];
  if (!snap)
    return {
      name: "snapshot",
      level: "warn",
      summary: `no snapshot in ${p.dir}`,
      hint: "bun run recovery snapshot (the recovery service takes them on a timer)",
    };
  const ageMs = p.now - Date.parse(snap.manifest.createdAt);
  return ageMs > maxAgeMs
    ? {
        name: "snapshot",
        level: "fail",
        summary: `newest snapshot is ${Math.round(ageMs / 60_000)} min old (${snap.manifest.name})`,
        hint: "is the recovery service running? bun run recovery snapshot",
      }
    : { name: "snapshot", level: "ok", summary: `${snap.manifest.name}, ${Math.round(ageMs / 1000)} s old` };
}

/**
 * The off-host copies: a snapshot only on this host dies with the database it would restore
 * (issue 16.4). Copies off (warn); none verified or the newest verified too old (fail); the newest
 * snapshot not copied yet (warn); else ok. Nothing without a snapshot.
 */
export function offHostCheck(
  p: SnapshotsProbe,
  maxAgeMs: number,
  offHostDomain: string | undefined,
): Check | undefined {
  if (p.snapshots.length === 0) return undefined;
  if (!offHostDomain)
    return {
      name: "offhost",
      level: "warn",
      summary: "snapshots have no off-host copy (SNAPSHOT_OFFHOST is none): losing this host loses them",
      hint: "set SNAPSHOT_OFFHOST to another region (docs/runbook.md)",
    };
  const { copied } = p;
  const newest = p.snapshots[0]!;
  const copiedAgeMs = copied ? p.now - Date.parse(copied.manifest.createdAt) : Infinity;
  if (!copied || copiedAgeMs > maxAgeMs)
    return {
      name: "offhost",
      level: "fail",
      summary: copied
        ? `newest snapshot with a verified copy in ${offHostDomain} is ${Math.round(copiedAgeMs / 60_000)} min old (${copied.manifest.name})`
        : `no snapshot has a verified copy in ${offHostDomain}`,
      hint: "recovery log 'off-host snapshot copy failed'; the leafnode link (assess replica line); bun run recovery snapshot",
    };
  if (copied !== newest)
    return {
      name: "offhost",
      level: "warn",
      summary: `newest snapshot ${newest.manifest.name} has no verified off-host copy yet (last copied: ${copied.manifest.name})`,
    };
  return { name: "offhost", level: "ok", summary: `${newest.manifest.name} copied to ${offHostDomain} and verified` };
}

/** The provider: not checked without a key (warn); unreachable, an error code or no balance (fail). */
export function providerCheck(p: Assessment["provider"]): Check {
  if (!p) return { name: "provider", level: "warn", summary: "not checked (PROVIDER_KEY unset)" };
  const bal = p.balance === null ? NaN : Number(p.balance);
  if (!p.reachable)
    return {
      name: "provider",
      level: "fail",
      summary: `${p.url} unreachable: ${p.error}`,
      hint: "tasks wait (breaker); check the network or the provider's status page",
    };
  if (p.error)
    return {
      name: "provider",
      level: "fail",
      summary: `provider answered ${p.error}`,
      hint: "fix the key or account (PROVIDER_KEY)",
    };
  if (!(bal > 0))
    return { name: "provider", level: "fail", summary: `balance ${p.balance}`, hint: "top up the provider account" };
  return { name: "provider", level: "ok", summary: `reachable, balance ${p.balance}` };
}

/** The solvers' config: refusing a revision (warn), disagreeing on key or revision (warn), else all on one. */
export function fleetConfigChecks(ws: Heartbeat[]): Check[] {
  const out: Check[] = [];
  const refusing = ws.filter((w) => w.configRejected);
  if (refusing.length)
    out.push({
      name: "config",
      level: "warn",
      summary: `${refusing.map((w) => `${w.workerId} refuses config rev ${w.configRejected!.revision} (${w.configRejected!.error})`).join("; ")}; they keep rev ${refusing[0]!.configRevision ?? "env"}`,
      hint: "bun run recovery config rollback (or config set a fixed one)",
    });
  const keys = [...new Set(ws.map((w) => w.keyName))];
  const revs = [...new Set(ws.map((w) => String(w.configRevision ?? "env")))];
  if (keys.length > 1 || revs.length > 1)
    out.push({
      name: "config",
      level: "warn",
      summary: `solvers disagree: keys ${keys.join(", ")}; config revisions ${revs.join(", ")}`,
      hint: "bun run recovery workers; a refusing solver lacks the key in its key file",
    });
  else if (!refusing.length)
    out.push({ name: "config", level: "ok", summary: `every solver on config rev ${revs[0]}, key ${keys[0]}` });
  return out;
}

/** The live solvers: unreadable heartbeats (warn), none alive (fail), else who and their config. Nothing when not probed. */
export function workersChecks(ws: Heartbeat[] | Error | undefined): Check[] {
  if (ws instanceof Error) return [{ name: "workers", level: "warn", summary: `heartbeats unreadable: ${ws.message}` }];
  if (!ws) return [];
  if (ws.length === 0)
    return [
      {
        name: "workers",
        level: "fail",
        summary: "no live solver (no heartbeat in 10 s): nothing is being solved",
        hint: "start a solver; check its log (systemctl status / journalctl)",
      },
    ];
  return [
    {
      name: "workers",
      level: "ok",
      summary: `${ws.length} alive: ${ws.map((w) => `${w.workerId} (${w.inFlight} in flight, breaker ${w.breaker})`).join(", ")}`,
    },
    ...fleetConfigChecks(ws),
  ];
}

/** The region state could not be read at all. */
export const regionsUnreadable = (e: Error): Check => ({
  name: "lease",
  level: "fail",
  summary: `region state unreadable: ${e.message}`,
});

const worst = (a: Level, b: Level): Level =>
  a === "fail" || b === "fail" ? "fail" : a === "warn" || b === "warn" ? "warn" : "ok";

/** The assessment's level: the worst of its checks (`ok` with none). */
export const overallLevel = (checks: Check[]): Level => checks.reduce<Level>((l, c) => worst(l, c.level), "ok");
