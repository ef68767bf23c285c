// What a failed drill's message should carry, since CI keeps only the message: how late this
// process's event loop ran (the relays, the emulator and the test's clients all live in it: a
// stall here is a stalled WAN and a silent provider), and the last errors the stack's processes
// logged (app logs are pino JSON lines, nats-server's are `[ERR]`/`[WRN]` lines).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

export interface LoopWatch {
  /** max lag, and the stalls over `stallMs` (when, how long), since the watch began. */
  summary(): string;
  /** Forgets what was seen so far (a setup's own blocking steps, say). */
  reset(): void;
  stop(): void;
}

/** Ticks every `everyMs`; a tick's lateness is the event loop's lag. */
export function watchEventLoop(o: { everyMs?: number; stallMs?: number; now?: () => number } = {}): LoopWatch {
  const every = o.everyMs ?? 100;
  const stallMs = o.stallMs ?? 500;
  const now = o.now ?? (() => performance.now());
  let t0 = now();
  let last = t0;
  let max = 0;
  const stalls: string[] = [];
  const timer = setInterval(() => {
    const t = now();
    const lag = t - last - every;
    last = t;
    if (lag > max) max = lag;
    if (lag >= stallMs) stalls.push(`${Math.round(lag)} ms at +${((t - t0) / 1000).toFixed(1)} s`);
  }, every);
  timer.unref?.();
  return {
    summary: () =>
      `event-loop lag of the test process (relays, emulator, clients): max ${Math.round(max)} ms; ${stalls.length} stalls >= ${stallMs} ms${stalls.length ? ` (${stalls.slice(-6).join(", ")})` : ""}`,
    reset() {
      t0 = last = now();
      max = 0;
      stalls.length = 0;
    },
    stop: () => clearInterval(timer),
  };
}

/** The logs in `dir` (`<name>.log`), for `lastErrors`. */
export const logsIn = (dir: string): LogFile[] =>
  existsSync(dir)
    ? readdirSync(dir)
        .filter((x) => x.endsWith(".log"))
        .map((x) => ({ file: join(dir, x), name: x.replace(/\.log$/, "") }))
    : [];

export interface LogFile {
  file: string;
  name: string;
}

/** The last `n` error lines of these logs, oldest first, each one short line. */
export function lastErrors(logs: LogFile[], n = 10): string[] {
  const found: { t: string; line: string }[] = [];
  for (const { file, name } of logs) {
    if (!existsSync(file)) continue;
    for (const raw of readFileSync(file, "utf8").split("\n")) {
      if (raw.startsWith("{")) {
        try {
          const j = JSON.parse(raw) as { level?: number; time?: string; msg?: string; err?: unknown };
          if ((j.level ?? 0) >= 50)
            found.push({
              t: j.time ?? "",
              line: `${(j.time ?? "").slice(11, 23)} ${name}: ${j.msg ?? ""}${j.err ? ` (${String(typeof j.err === "object" ? JSON.stringify(j.err) : j.err).slice(0, 120)})` : ""}`,
            });
        } catch {}
      } else {
        // nats-server: `[pid] 2026/12/05 13:37:17.496990 [ERR] ...`
        const m = /^\[\d+\] (\d{4})\/(\d\d)\/(\d\d) (\S+) \[(ERR|FTL)\] (.*)$/.exec(raw);
        if (m) found.push({ t: `${m[1]}-${m[2]}-${m[3]}T${m[4]}`, line: `${m[4]!.slice(0, 12)} ${name}: ${m[6]}` });
      }
    }
  }
  return found
    .sort((a, b) => a.t.localeCompare(b.t))
    .slice(-n)
    .map((x) => x.line.slice(0, 220));
}

/** Runs a drill's body; a failure's message gains the diagnosis (CI shows only the message). */
export async function withDiagnosis<T>(diagnose: () => string, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (err) {
    if (err instanceof Error) err.message += `\n--- diagnosis ---\n${diagnose()}`;
    throw err;
  }
}
