// Growth from warm-up to the end, and the soak's goals. Each process is judged over its own
// samples from its warm-up on (`warmupMs` after it started) to its last one (a killed solver: its
// last before the kill; a restarted gateway: its second incarnation on its own). A disturbance
// (a solver killed, the gateway restarted) makes the survivors take a step: the killed solver's
// tasks are taken over, the clients' retries arrive at once, and pools (Postgres connections,
// keep-alive connections to the provider) grow to a size they keep, up to their bound: no leak.
// So the samples are cut into quiet stretches (each starting `SETTLE_MS` after a disturbance and
// ending at the next), and growth is the sum of what each stretch grew, its two ends each the
// median of up to three samples (a garbage collector's sawtooth is not growth; for held counts,
// fds and connections, their floor: a socket open for a moment is no leak). A leak grows in
// the quiet too and adds up over the stretches; a step at a disturbance does not count. A process
// with no stretch of two samples is listed as too short to judge. Judged per process: RSS, fds
// (less its keep-alive connections, a solver's to the provider and the gateway's from the client:
// pools that swing with the load, printed apart), its Postgres connections; globally: the NATS consumers that stay until deleted (the same way)
// and connections left behind by processes that are gone.
import type { Sample, Watched } from "./sample.ts";

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

/** A kill or restart: from when it began (`at`) to when it was done (`until`), ms since the soak began. */
export interface Disturbance {
  at: number;
  until: number;
}

/** Samples cut into quiet stretches: a disturbance ends one; samples until SETTLE_MS after it was done belong to none. */
export function quietStretches<T extends { at: number }>(xs: T[], disturbances: Disturbance[]): T[][] {
  const out: T[][] = [];
  let cur: T[] = [];
  for (const x of xs) {
    const prev = cur.length ? cur[cur.length - 1]!.at : Number.NEGATIVE_INFINITY;
    if (cur.length && disturbances.some((d) => d.at > prev && d.at <= x.at)) {
      out.push(cur);
      cur = [];
    }
    if (!disturbances.some((d) => x.at >= d.at && x.at < d.until + SETTLE_MS)) cur.push(x);
  }
  if (cur.length) out.push(cur);
  return out.filter((s) => s.length >= 2);
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
  /** Quiet stretches it was judged over. */
  stretches?: number;
  rss?: { from: number; to: number; pct: number };
  fds?: Change & { tolerance: number };
  pg?: Change & { tolerance: number };
  /** Its keep-alive connections (to the provider, from the clients): printed, not judged. */
  pooled?: Change;
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

/**
 * The level of a held count (fds, connections, consumers) at a window's end: its floor. A socket
 * open for a moment (a periodic job's request, a scrape) is a spike above it, whenever the sample
 * lands; a leak raises the floor itself.
 */
export const floor = (xs: number[]) => Math.min(...xs);

/**
 * One figure's growth summed over the stretches; `from` is its value at the first stretch's start.
 * Each end's level is `level` of its samples: the median (RSS: a collector's sawtooth), or `floor`.
 */
export function stretchedChange<T>(stretches: T[][], f: (x: T) => number, level = median): Change {
  let delta = 0;
  for (const s of stretches) {
    const [a, b] = ends(s);
    delta += level(b.map(f)) - level(a.map(f));
  }
  const from = level(ends(stretches[0]!)[0].map(f));
  return { from, to: from + delta, delta };
}

/** One process's growth over its judged window. */
export function processGrowth(
  w: Watched & { judged: boolean; minWarmupMs?: number },
  samples: Sample[],
  o: { warmupMs: number; soakStart: number; disturbances: Disturbance[] },
): ProcessGrowth {
  const warm = w.startedAt + Math.max(o.warmupMs, w.minWarmupMs ?? 0);
  const own = samples.filter((s) => s.procs[w.label] && s.at >= warm);
  if (!w.judged) return { label: w.label, judged: false, note: "the soak's own process (client, emulator)", ok: true };
  const stretches = quietStretches(own, o.disturbances).map((s) => s.map((x) => ({ at: x.at, ...x.procs[w.label]! })));
  if (stretches.length === 0)
    return {
      label: w.label,
      judged: false,
      note: `${own.length} sample(s) after its warm-up (${Math.round(warm / 1000)} s into the soak), no quiet stretch of two: too short-lived to judge`,
      ok: true,
    };
  const rss = stretchedChange(stretches, (x) => x.rssMb);
  const pct = Math.round((rss.delta / rss.from) * 1000) / 10;
  const tolerance = w.startedAt > o.soakStart ? RESTARTED_FD_TOLERANCE : 0;
  const fds = { ...stretchedChange(stretches, (x) => x.fds, floor), tolerance };
  const pg = { ...stretchedChange(stretches, (x) => x.pg, floor), tolerance };
  return {
    label: w.label,
    judged: true,
    from: stretches[0]![0]!.at,
    to: stretches[stretches.length - 1]!.at(-1)!.at,
    samples: stretches.reduce((n, s) => n + s.length, 0),
    stretches: stretches.length,
    rss: { from: rss.from, to: rss.to, pct },
    fds,
    pg,
    pooled: stretchedChange(stretches, (x) => x.pooled),
    ok: pct < RSS_GROWTH_MAX_PCT && fds.delta <= tolerance && pg.delta <= tolerance,
  };
}

/** Consumers and connections over the window from the soak's warm-up (and settling) to the end. */
export function globalGrowth(
  samples: Sample[],
  warmupMs: number,
  disturbances: Disturbance[],
): GlobalGrowth | undefined {
  const after = samples.filter((s) => s.at >= warmupMs);
  const stretches = quietStretches(after, disturbances);
  if (stretches.length === 0) return undefined;
  const [first, last] = ends(after);
  const at = (xs: Sample[], f: (s: Sample) => number) => median(xs.map(f));
  return {
    from: after[0]!.at,
    to: after[after.length - 1]!.at,
    consumers: stretchedChange(stretches, (s) => s.consumers, floor),
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

/** A judged process's goals that failed (RSS, fds, Postgres connections), each as one phrase (empty: all met). */
export function processFailures(p: Pick<ProcessGrowth, "label" | "rss" | "fds" | "pg">): string[] {
  const failed: string[] = [];
  if (p.rss && p.rss.pct >= RSS_GROWTH_MAX_PCT) failed.push(`${p.label} RSS +${p.rss.pct}%`);
  if (p.fds && p.fds.delta > p.fds.tolerance) failed.push(`${p.label} fds +${p.fds.delta}`);
  if (p.pg && p.pg.delta > p.pg.tolerance) failed.push(`${p.label} Postgres connections +${p.pg.delta}`);
  return failed;
}

/** The goals that failed, each as one phrase (empty: all met). */
export function failedGoals(procs: ProcessGrowth[], global: GlobalGrowth | undefined, out: Outcome): string[] {
  const failed = procs.filter((p) => p.judged && !p.ok).flatMap(processFailures);
  if (!global) failed.push("no quiet stretch of two samples after the warm-up");
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
