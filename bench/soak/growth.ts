// Growth from warm-up to the end, and the soak's goals. Each process is compared over its own
// judged window (a killed solver: up to its last sample before the kill; a restarted gateway: its
// second incarnation on its own). The window starts at its first sample at least `warmupMs` after
// it started and at least `SETTLE_MS` after the first disturbance it lived through (a sibling
// solver killed: its tasks taken over, its pools grown to the size they keep; growth up to a
// pool's bound is no leak), and ends at its last sample. Each end is the median of up to three
// samples (a garbage collector's sawtooth is not growth). One with fewer than two samples in its
// window is listed as too short to judge. Judged per process: RSS, fds, its Postgres connections;
// globally: the NATS consumers that stay until deleted (same window from the soak's start) and
// connections left behind by a process that is gone.
import type { ProcessFigures, Sample, Watched } from "./sample.ts";

/** RSS may grow less than this, in percent. */
export const RSS_GROWTH_MAX_PCT = 10;
/**
 * Extra fds (and Postgres connections) a process started during the soak (a solver started after
 * a kill, the restarted gateway) may hold at its end over its window's start: its pools still
 * filling (one more keep-alive connection to the provider, one more Postgres connection). A
 * process that ran the whole soak gets none.
 */
export const RESTARTED_FD_TOLERANCE = 2;
/** How long after a disturbance the survivors' pools have grown to what they keep. */
export const SETTLE_MS = 15_000;

/** When a process started at `startedAt` is warm: past its warm-up and settled after the first disturbance it saw. */
export function warmAt(startedAt: number, warmupMs: number, disturbances: number[]): number {
  const first = disturbances.filter((t) => t > startedAt).sort((a, b) => a - b)[0];
  return Math.max(startedAt + warmupMs, first === undefined ? 0 : first + SETTLE_MS);
}

const median = (xs: number[]) => {
  const v = [...xs].sort((a, b) => a - b);
  const m = Math.floor(v.length / 2);
  return v.length % 2 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
};

/** The two ends of a window of `n` samples: up to three each, never overlapping. */
export function ends<T>(xs: T[]): [T[], T[]] {
  const k = Math.min(3, Math.floor(xs.length / 2));
  return [xs.slice(0, k), xs.slice(xs.length - k)];
}

export interface Change {
  from: number;
  to: number;
  delta: number;
}

export interface ProcessGrowth {
  label: string;
  judged: boolean;
  /** Why it is not judged (too short-lived, not one of the pipeline's). */
  note?: string;
  from?: number;
  to?: number;
  samples?: number;
  rss?: { from: number; to: number; pct: number };
  fds?: Change & { tolerance: number };
  pg?: Change & { tolerance: number };
  ok: boolean;
}

export interface GlobalGrowth {
  from: number;
  to: number;
  consumers: Change;
  /** Printed, not judged: they expire on their own. */
  expiringConsumers: { from: number; to: number };
  /** Printed, not judged: the sum over incarnations whose pools are at different stages (judged per process). */
  pgConnections: { from: number; to: number };
  /** Connections of processes that are gone, at the last sample. */
  pgOrphans: number;
}

/** The change of one figure between the medians of a window's two ends. */
function change(a: ProcessFigures[], b: ProcessFigures[], f: (x: ProcessFigures) => number): Change {
  const from = median(a.map(f));
  const to = median(b.map(f));
  return { from, to, delta: to - from };
}

/** One process's growth over its judged window. */
export function processGrowth(
  w: Watched & { judged: boolean; minWarmupMs?: number },
  samples: Sample[],
  o: { warmupMs: number; soakStart: number; disturbances: number[] },
): ProcessGrowth {
  const warm = warmAt(w.startedAt, Math.max(o.warmupMs, w.minWarmupMs ?? 0), o.disturbances);
  const own = samples.filter((s) => s.procs[w.label] && s.at >= warm);
  if (!w.judged) return { label: w.label, judged: false, note: "the soak's own process (client, emulator)", ok: true };
  if (own.length < 2)
    return {
      label: w.label,
      judged: false,
      note: `${own.length} sample(s) after its warm-up (${Math.round(warm / 1000)} s into the soak): too short-lived to judge`,
      ok: true,
    };
  const [first, last] = ends(own.map((s) => s.procs[w.label]!));
  const rss = change(first, last, (x) => x.rssMb);
  const pct = Math.round((rss.delta / rss.from) * 1000) / 10;
  const tolerance = w.startedAt > o.soakStart ? RESTARTED_FD_TOLERANCE : 0;
  const fds = { ...change(first, last, (x) => x.fds), tolerance };
  const pg = { ...change(first, last, (x) => x.pg), tolerance };
  return {
    label: w.label,
    judged: true,
    from: own[0]!.at,
    to: own[own.length - 1]!.at,
    samples: own.length,
    rss: { from: rss.from, to: rss.to, pct },
    fds,
    pg,
    ok: pct < RSS_GROWTH_MAX_PCT && fds.delta <= tolerance && pg.delta <= tolerance,
  };
}

/** Consumers and connections over the window from the soak's warm-up (and settling) to the end. */
export function globalGrowth(samples: Sample[], warmupMs: number, disturbances: number[]): GlobalGrowth | undefined {
  const warm = warmAt(0, warmupMs, disturbances);
  const after = samples.filter((s) => s.at >= warm);
  if (after.length < 2) return undefined;
  const [first, last] = ends(after);
  const at = (xs: Sample[], f: (s: Sample) => number) => median(xs.map(f));
  const consumers = { from: at(first, (s) => s.consumers), to: at(last, (s) => s.consumers) };
  return {
    from: after[0]!.at,
    to: after[after.length - 1]!.at,
    consumers: { ...consumers, delta: consumers.to - consumers.from },
    expiringConsumers: { from: at(first, (s) => s.expiringConsumers), to: at(last, (s) => s.expiringConsumers) },
    pgConnections: { from: at(first, (s) => s.pgConnections), to: at(last, (s) => s.pgConnections) },
    pgOrphans: after[after.length - 1]!.pgOrphans,
  };
}

export interface Outcome {
  offered: number;
  accepted: number;
  /** Offered tasks the client gave up on (every retry failed). */
  unaccepted: number;
  /** Accepted tasks not completed once the drain ended (checked in Postgres). */
  lost: number;
  /** Tasks in the database. */
  tasks: number;
  providerSubmissions: number;
  /** Extra provider submissions the kills explain: a solver killed between in.php and its checkpoint. */
  explainedExtra: number;
  clientErrors: Record<string, number>;
}

/** The goals that failed, each as one phrase (empty: all met). */
export function failedGoals(procs: ProcessGrowth[], global: GlobalGrowth | undefined, out: Outcome): string[] {
  const failed: string[] = [];
  for (const p of procs) {
    if (!p.judged || p.ok) continue;
    if (p.rss && p.rss.pct >= RSS_GROWTH_MAX_PCT) failed.push(`${p.label} RSS +${p.rss.pct}%`);
    if (p.fds && p.fds.delta > p.fds.tolerance) failed.push(`${p.label} fds +${p.fds.delta}`);
    if (p.pg && p.pg.delta > p.pg.tolerance) failed.push(`${p.label} Postgres connections +${p.pg.delta}`);
  }
  if (!global) failed.push("fewer than two samples after the warm-up");
  else {
    if (global.consumers.delta > 0) failed.push(`NATS consumers +${global.consumers.delta}`);
    if (global.pgOrphans > 0) failed.push(`${global.pgOrphans} Postgres connections of processes that are gone`);
  }
  if (out.lost > 0) failed.push(`${out.lost} lost`);
  if (out.unaccepted > 0) failed.push(`${out.unaccepted} offered tasks never accepted`);
  const extra = out.providerSubmissions - out.tasks;
  if (extra > out.explainedExtra) failed.push(`${extra} extra paid (${out.explainedExtra} explained by kills)`);
  return failed;
}
