import type { KV } from "@nats-io/kv";
import type { Db } from "@pipeline/shared/db";
import {
  type ConfigRevision,
  configHistory,
  describeIssues,
  type Heartbeat,
  liveWorkers,
  putSolverConfig,
  SolverRuntimeConfig,
} from "@pipeline/shared/kv";
import { recordAudit } from "./audit.ts";

export interface ConfigDeps {
  config: KV;
  workers: KV;
  db: Db;
  actor: string;
}

/** The fields an operator writes; who and when are filled in by the command. */
const Editable = SolverRuntimeConfig.omit({ changedBy: true, changedAt: true });

export class ConfigCommandError extends Error {
  override name = "ConfigCommandError";
}

function stamp(doc: unknown, actor: string, reason?: string): unknown {
  const edited = Editable.safeParse(doc);
  if (!edited.success) throw new ConfigCommandError(`invalid config: ${describeIssues(edited.error)}`);
  return {
    ...edited.data,
    ...(reason !== undefined ? { reason } : {}),
    changedBy: actor.slice(0, 64),
    changedAt: new Date().toISOString(),
  };
}

/** `config set`: validates, stores a new revision, audits it. Nothing is written when it is invalid. */
export async function setConfig(d: ConfigDeps, doc: unknown, reason?: string): Promise<{ revision: number }> {
  const { revision, config } = await putSolverConfig(d.config, stamp(doc, d.actor, reason));
  await recordAudit(d.db, {
    actor: d.actor,
    action: "config.set",
    detail: { revision, providerKey: config.providerKey, reason: reason ?? null },
  });
  return { revision };
}

/**
 * `config rollback [revision]`: stores again the given revision, or the newest valid revision
 * before the current one (the last known good). Only a revision that still validates is restored.
 */
export async function rollbackConfig(
  d: ConfigDeps,
  to?: number,
  reason?: string,
): Promise<{ revision: number; restored: number }> {
  const all = await configHistory(d.config);
  if (all.length === 0) throw new ConfigCommandError("no config stored: nothing to roll back");
  const current = all[all.length - 1]!;
  let target: ConfigRevision | undefined;
  if (to !== undefined) {
    target = all.find((r) => r.revision === to);
    if (!target)
      throw new ConfigCommandError(
        `revision ${to} is not in the kept history (${all.map((r) => r.revision).join(", ")})`,
      );
    if (!target.parsed.ok)
      throw new ConfigCommandError(`revision ${to} is not valid (${target.parsed.error}); pick another`);
  } else {
    target = [...all].reverse().find((r) => r.revision !== current.revision && r.parsed.ok);
    if (!target) throw new ConfigCommandError("no earlier valid revision in the kept history");
  }
  if (!target.parsed.ok) throw new ConfigCommandError("unreachable");
  const { changedBy: _by, changedAt: _at, reason: _r, ...fields } = target.parsed.value;
  const why = reason ?? `rollback to revision ${target.revision}`;
  const { revision } = await putSolverConfig(d.config, stamp(fields, d.actor, why));
  await recordAudit(d.db, {
    actor: d.actor,
    action: "config.rollback",
    detail: { revision, restored: target.revision, replaced: current.revision, reason: why },
  });
  return { revision, restored: target.revision };
}

export interface Convergence {
  revision: number;
  /** Live workers and what each has in use. */
  workers: Heartbeat[];
  /** Workers that applied the revision. */
  applied: string[];
  /** Workers that refused it, with their reason. */
  refused: { workerId: string; error: string }[];
  /** Workers that have not said anything about it yet. */
  pending: string[];
  ms: number;
}

/** Waits until every live worker has applied (or refused) `revision`, or `waitMs` passes. */
export async function awaitConvergence(workersKv: KV, revision: number, waitMs: number): Promise<Convergence> {
  const t0 = Date.now();
  for (;;) {
    const { workers } = await liveWorkers(workersKv);
    const applied = workers.filter((w) => (w.configRevision ?? 0) >= revision).map((w) => w.workerId);
    const refused = workers
      .filter((w) => w.configRejected && w.configRejected.revision >= revision)
      .map((w) => ({ workerId: w.workerId, error: w.configRejected!.error }));
    const pending = workers
      .map((w) => w.workerId)
      .filter((id) => !applied.includes(id) && !refused.some((r) => r.workerId === id));
    if ((pending.length === 0 && workers.length > 0) || Date.now() - t0 >= waitMs)
      return { revision, workers, applied, refused, pending, ms: Date.now() - t0 };
    await Bun.sleep(200);
  }
}

/**
 * `rotate-key --to <name>`: a new revision naming another key of the solvers' key file (the
 * value never passes through here). Solvers switch within a heartbeat or two without a restart;
 * provider tasks of the old key are resubmitted with the new one, never polled with the old.
 */
export async function rotateKey(
  d: ConfigDeps,
  to: string,
  o: { reason?: string; waitMs: number },
): Promise<Convergence & { from: string | null }> {
  const all = await configHistory(d.config);
  const base = [...all].reverse().find((r) => r.parsed.ok);
  const before = await liveWorkers(d.workers);
  const from = base?.parsed.ok ? base.parsed.value.providerKey : (before.workers[0]?.keyName ?? null);
  const fields = base?.parsed.ok ? (({ changedBy: _b, changedAt: _a, reason: _r, ...f }) => f)(base.parsed.value) : {};
  const reason = o.reason ?? "key rotation";
  const { revision } = await putSolverConfig(d.config, stamp({ ...fields, providerKey: to }, d.actor, reason));
  const c = await awaitConvergence(d.workers, revision, o.waitMs);
  await recordAudit(d.db, {
    actor: d.actor,
    action: "key.rotate",
    detail: {
      from,
      to,
      revision,
      reason,
      applied: c.applied,
      refused: c.refused,
      pending: c.pending,
      keyRefs: [...new Set(c.workers.map((w) => w.keyRef))],
    },
  });
  return { ...c, from };
}
