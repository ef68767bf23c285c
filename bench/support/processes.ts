import { readFileSync } from "node:fs";
import type { Proc } from "@pipeline/devstack/testing";

/** SIGTERM, then SIGKILL if the process has not exited after `graceMs`. */
export async function stopProc(p: Proc, graceMs = 10_000): Promise<void> {
  if (p.exitCode() !== undefined) return;
  const exited = p.kill("SIGTERM");
  const late = await Promise.race([exited.then(() => false), Bun.sleep(graceMs).then(() => true)]);
  if (late) await p.kill("SIGKILL");
}

/** Resolves once the process's log holds `text`; rejects if it exits first or after `timeoutMs`. */
export async function waitForLog(p: Proc, text: string, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (p.log().includes(text)) return;
    if (p.exitCode() !== undefined)
      throw new Error(`${p.name} exited (${p.exitCode()}) before logging "${text}": ${p.log().slice(-600)}`);
    if (Date.now() > until)
      throw new Error(`${p.name} did not log "${text}" within ${timeoutMs} ms: ${p.log().slice(-600)}`);
    await Bun.sleep(50);
  }
}

/** Peak and current resident set of a live process in MB, from /proc/<pid>/status (VmHWM, VmRSS). */
export function memoryOf(pid: number): { peakMb: number; rssMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { peakMb: kb("VmHWM") / 1024, rssMb: kb("VmRSS") / 1024 };
}
