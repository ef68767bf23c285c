// The gate's figures, pure (figures.test.ts): one window of a region's tasks split by who owns
// their shard, and the solvers' heartbeats folded into per-version provider counts and lost
// processes. The adapters (../adapters/regions.ts) read the rows and the heartbeats; nothing here does I/O.
import { LIST_PRICE_MICROS } from "@pipeline/shared/provider";
import type { TaskType } from "@pipeline/shared/schemas";
import { shardOf } from "@pipeline/shared/subjects";
import type { VersionFigures } from "./plan.ts";

/** The columns of a task row the gate reads. */
export interface WindowRow {
  id: string;
  state: string;
  attempts: number;
  errorCode: string | null;
  providerSubmissions: number;
  /** Epoch milliseconds. */
  createdAtMs: number;
  completedAtMs: number | null;
  /** The task's type (the list price of an extra submission), when read. */
  type?: string;
  /** A client's report on the answer: accepted by the site (true), refused (false), none (null). */
  accepted?: boolean | null;
}

/** A task that failed, is waiting for a retry, or needed one: the canary's failure, whatever became of it later. */
export const troubled = (r: WindowRow) =>
  r.state === "failed" || r.state === "retrying" || r.attempts > 1 || (r.errorCode !== null && r.errorCode !== "");

/** p-th percentile (nearest rank) of `xs`, or null for none. */
export function percentile(xs: number[], p: number): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

export type TaskFigures = Pick<
  VersionFigures,
  "tasks" | "failed" | "extraPaid" | "extraPaidMicros" | "reports" | "rejected" | "p95Ms"
>;

/**
 * The window's rows split by the version that owns each row's shard now (`owners[shard]`): the
 * same traffic, cut by shard. A task not finished yet counts with its age so far, so a version that
 * stalls shows it in its p95 before any task fails.
 */
export function taskFigures(rows: WindowRow[], owners: string[], nowMs: number): Map<string, TaskFigures> {
  const acc = new Map<
    string,
    {
      tasks: number;
      failed: number;
      extraPaid: number;
      micros: number;
      reports: number;
      rejected: number;
      times: number[];
    }
  >();
  for (const r of rows) {
    const version = owners[shardOf(r.id, owners.length)]!;
    const a = acc.get(version) ?? { tasks: 0, failed: 0, extraPaid: 0, micros: 0, reports: 0, rejected: 0, times: [] };
    a.tasks++;
    if (troubled(r)) a.failed++;
    const extra = Math.max(0, r.providerSubmissions - 1);
    a.extraPaid += extra;
    a.micros += extra * (LIST_PRICE_MICROS[r.type as TaskType] ?? 0);
    if (r.accepted === true || r.accepted === false) a.reports++;
    if (r.accepted === false) a.rejected++;
    a.times.push((r.completedAtMs ?? nowMs) - r.createdAtMs);
    acc.set(version, a);
  }
  const out = new Map<string, TaskFigures>();
  for (const [v, a] of acc)
    out.set(v, {
      tasks: a.tasks,
      failed: a.failed,
      extraPaid: a.extraPaid,
      extraPaidMicros: a.micros,
      reports: a.reports,
      rejected: a.rejected,
      p95Ms: roundOrNull(percentile(a.times, 95)),
    });
  return out;
}

/** What a heartbeat says that the gate uses. */
export interface Beat {
  workerId: string;
  version: string;
  startedAt: string;
  tally?: { providerCalls: number; providerErrors: number } | undefined;
}

/**
 * Per-version provider calls, errors and lost processes since the window began, from successive
 * heartbeat listings. A process is lost when it restarts (same worker id, another start) or its
 * heartbeat vanishes without the delete a drained solver writes on its way out.
 */
export class ProcessWindow {
  private procs = new Map<string, { version: string; startedAt: string; base: Tally; last: Tally; gone: boolean }>();
  /** Counts of processes that restarted within the window, per version. */
  private frozen = new Map<string, Tally>();
  private lost = new Map<string, number>();

  /** `startMs`: the window's start; a process started after it counts from zero. */
  constructor(private readonly startMs: number) {}

  /** `beats`: the current heartbeats; `deleted`: workers whose entry was deleted (a clean stop). */
  observe(beats: Beat[], deleted: Set<string>): void {
    const seen = new Set<string>();
    for (const b of beats) {
      seen.add(b.workerId);
      const tally = { calls: b.tally?.providerCalls ?? 0, errors: b.tally?.providerErrors ?? 0 };
      const p = this.procs.get(b.workerId);
      const fresh = () => ({
        version: b.version,
        startedAt: b.startedAt,
        base: Date.parse(b.startedAt) >= this.startMs ? ZERO : tally,
        last: tally,
        gone: false,
      });
      if (!p) this.procs.set(b.workerId, fresh());
      else if (p.startedAt !== b.startedAt) {
        // Restarted: what the old process did stays in the window; the new one counts from zero.
        this.freeze(p);
        if (!p.gone) this.bump(p.version);
        this.procs.set(b.workerId, { ...fresh(), base: ZERO });
      } else Object.assign(p, { last: tally, gone: false });
    }
    for (const [id, p] of this.procs) {
      if (seen.has(id) || p.gone) continue;
      p.gone = true;
      if (!deleted.has(id)) this.bump(p.version);
    }
  }

  private freeze(p: { version: string; base: Tally; last: Tally }) {
    const f = this.frozen.get(p.version) ?? ZERO;
    this.frozen.set(p.version, {
      calls: f.calls + p.last.calls - p.base.calls,
      errors: f.errors + p.last.errors - p.base.errors,
    });
  }

  private bump(version: string) {
    this.lost.set(version, (this.lost.get(version) ?? 0) + 1);
  }

  figures(version: string): Pick<VersionFigures, "providerCalls" | "providerErrors" | "lostProcesses"> {
    const t = { ...(this.frozen.get(version) ?? ZERO) };
    for (const p of this.procs.values()) {
      if (p.version !== version) continue;
      t.calls += p.last.calls - p.base.calls;
      t.errors += p.last.errors - p.base.errors;
    }
    return { providerCalls: t.calls, providerErrors: t.errors, lostProcesses: this.lost.get(version) ?? 0 };
  }

  /** Workers seen in the window and not yet gone (to tell a clean stop from a lost heartbeat). */
  knownWorkers(): string[] {
    return [...this.procs].filter(([, p]) => !p.gone).map(([id]) => id);
  }

  /** Live processes per version (in the last listing). */
  processes(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const p of this.procs.values()) if (!p.gone) out[p.version] = (out[p.version] ?? 0) + 1;
    return out;
  }
}

interface Tally {
  calls: number;
  errors: number;
}
const ZERO: Tally = { calls: 0, errors: 0 };

const roundOrNull = (x: number | null) => (x === null ? null : Math.round(x));
