// Running commands: one place that spawns, collects output and fails naming the command.
import { spawnSync } from "node:child_process";
import { spawnCollect } from "../spawn.ts";

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export type Log = (line: string) => void;

/** Runs argv to completion; never throws (the caller decides what a failure means). */
export function run(
  argv: string[],
  o: { input?: string; env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {},
): RunResult {
  const r = spawnSync(argv[0]!, argv.slice(1), {
    input: o.input,
    env: o.env ? { ...process.env, ...o.env } : process.env,
    cwd: o.cwd,
    encoding: "utf8",
    timeout: o.timeoutMs ?? 600_000,
    maxBuffer: 256 * 1024 * 1024,
  });
  return {
    code: r.status ?? (r.error ? 127 : 1),
    stdout: r.stdout ?? "",
    stderr: r.stderr ?? (r.error ? String(r.error) : ""),
  };
}

/** run, without blocking the event loop (several machines are waited for at once). */
export async function runAsync(
  argv: string[],
  o: { input?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<RunResult> {
  return spawnCollect(argv, {
    stdin: o.input ? new Blob([o.input]) : "ignore",
    env: o.env ? { ...process.env, ...o.env } : process.env,
    timeoutMs: o.timeoutMs ?? 600_000,
  });
}

/** Like run, but throws unless it exits 0, with the command and the end of its output; returns stdout. */
export function check(argv: string[], o: Parameters<typeof run>[1] = {}): string {
  const r = run(argv, o);
  if (r.code !== 0) {
    const tail = `${r.stderr}\n${r.stdout}`.trim().split("\n").slice(-15).join("\n");
    throw new Error(`${argv.slice(0, 6).join(" ")}${argv.length > 6 ? " ..." : ""}: exit ${r.code}\n${tail}`);
  }
  return r.stdout;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `probe` until it returns a value (not undefined) or `timeoutMs` passes; throws `what` then. */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  probe: () => T | undefined | Promise<T | undefined>,
  everyMs = 500,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
