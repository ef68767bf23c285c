// The worker-crash drill kills a process a KV heartbeat names: the pid must be a solver of this
// region on this host before anything is sent to it (a forged heartbeat with pid -1 or 1 would
// otherwise kill every process, or init). Checked against /proc: the command line runs the
// solver, the environment's REGION is this region (default `local`), and the process started
// before the heartbeat's `startedAt` (a pid reused since by another process fails this).
import { readFileSync } from "node:fs";

export interface VictimCheck {
  ok: boolean;
  why: string;
}

export interface ProcInfo {
  cmdline: string[];
  environ: Record<string, string>;
  /** Start time of the process (wall clock), when known. */
  startedAt?: Date;
}

/** Reads /proc/<pid> (undefined when there is no such process or it cannot be read). */
export function readProc(pid: number): ProcInfo | undefined {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    const environ = Object.fromEntries(
      readFileSync(`/proc/${pid}/environ`, "utf8")
        .split("\0")
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
    );
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const ticks = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
    const uptime = Number(readFileSync("/proc/uptime", "utf8").split(" ")[0]);
    const startedAt = Number.isFinite(ticks) ? new Date(Date.now() - (uptime - ticks / 100) * 1000) : undefined;
    return { cmdline, environ, ...(startedAt ? { startedAt } : {}) };
  } catch {
    return undefined;
  }
}

/** Pure: may the drill kill `pid`, given what /proc says of it? */
export function checkVictim(
  pid: number,
  region: string,
  heartbeatStartedAt: string,
  info: ProcInfo | undefined,
): VictimCheck {
  if (!Number.isInteger(pid) || pid <= 1) return { ok: false, why: `pid ${pid} is not a single process` };
  if (!info) return { ok: false, why: `no process ${pid} on this host` };
  const cmd = info.cmdline.join(" ");
  if (!/apps\/solver\/src\/main\.ts|(^|\/)solver(-[\w.-]+)?(\s|$)/.test(cmd))
    return { ok: false, why: `pid ${pid} is not a solver (${info.cmdline[0] ?? "?"})` };
  const itsRegion = info.environ.REGION ?? "local";
  if (itsRegion !== region) return { ok: false, why: `pid ${pid} is a solver of region ${itsRegion}, not ${region}` };
  const hb = Date.parse(heartbeatStartedAt);
  if (info.startedAt && Number.isFinite(hb) && info.startedAt.getTime() > hb + 5000)
    return { ok: false, why: `pid ${pid} started after the heartbeat's solver did: the pid was reused` };
  return { ok: true, why: "a solver of this region" };
}
