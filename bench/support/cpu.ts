import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** Kernel clock ticks per second (USER_HZ); 100 on every Linux this runs on. */
const TICKS_PER_SECOND = 100;

/** User + system CPU seconds a live process has used (0 once it is gone). */
export function cpuSecondsOf(pid: number): number {
  try {
    // Fields after the command name: utime and stime are the 12th and 13th.
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(f[11]) + Number(f[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** The postmaster of a cluster (first line of postmaster.pid) and every process it forked. */
export function postgresPids(dataDir: string): number[] {
  let postmaster: number;
  try {
    postmaster = Number(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  } catch {
    return [];
  }
  const children = readdirSync("/proc").flatMap((d) => {
    if (!/^\d+$/.test(d)) return [];
    try {
      const ppid = Number(readFileSync(`/proc/${d}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
      return ppid === postmaster ? [Number(d)] : [];
    } catch {
      return [];
    }
  });
  return [postmaster, ...children];
}

/**
 * CPU seconds used by named groups of processes between start() and stop(). A process found
 * only at stop() counts from zero (a Postgres backend forked meanwhile); one gone by then is lost.
 */
export function cpuMeter(groups: Record<string, () => number[]>) {
  const self = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
  };
  let before = new Map<number, number>();
  let selfBefore = 0;
  return {
    start() {
      before = new Map(Object.values(groups).flatMap((pids) => pids().map((pid) => [pid, cpuSecondsOf(pid)] as const)));
      selfBefore = self();
    },
    /** Seconds per group, plus `bench` (this process: the clients and the measuring). */
    stop(): Record<string, number> {
      const out: Record<string, number> = {};
      for (const [name, pids] of Object.entries(groups))
        out[name] = pids().reduce((s, pid) => s + cpuSecondsOf(pid) - (before.get(pid) ?? 0), 0);
      out.bench = self() - selfBefore;
      return out;
    },
  };
}

/** Milliseconds of CPU per task, per group and in total, rounded to 0.01 (the totals are around 1 ms). */
export function perTask(seconds: Record<string, number>, tasks: number): Record<string, number> {
  const out: Record<string, number> = {};
  let total = 0;
  for (const [k, s] of Object.entries(seconds)) {
    out[k] = Math.round((s * 100_000) / tasks) / 100;
    total += s;
  }
  out.total = Math.round((total * 100_000) / tasks) / 100;
  return out;
}

/** "12.3 (solvers 5.1, postgres 4.0, ...)": total first, then each part, largest first. */
export const cpuText = (ms: Record<string, number>) =>
  `${ms.total} (${Object.entries(ms)
    .filter(([k]) => k !== "total")
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(", ")})`;
