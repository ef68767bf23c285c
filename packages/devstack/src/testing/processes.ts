// The apps as real OS processes (`bun apps/<app>/src/main.ts`), each with its output in a log file:
// what the end-to-end tests (tests/harness.ts) and the benchmarks (bench/) start.
import { openSync, readFileSync } from "node:fs";
import { isAbsolute, join } from "node:path";

/** The repository's root. */
export const ROOT = join(import.meta.dir, "..", "..", "..", "..");
const BUN = process.execPath;

export interface Proc {
  name: string;
  pid: number;
  logFile: string;
  exited: Promise<number | null>;
  /** The exit code once exited, undefined while running. */
  exitCode(): number | null | undefined;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
  log(): string;
}

/** The provider key and callback secret the test and bench stacks use. */
export const PROVIDER_KEY = "e2e-provider-key-0001";
export const WEBHOOK_SECRET = "e2e-webhook-secret-0001";

/**
 * Runs `bun <script>` (relative to the repository's root) as a real process with its output in a
 * log file; `prefix` runs it through another command first (`ip netns exec <ns>`, which execs bun:
 * the pid is bun's and signals reach it).
 */
export function spawnApp(
  name: string,
  script: string,
  env: Record<string, string>,
  logDir: string,
  prefix: string[] = [],
): Proc {
  const logFile = join(logDir, `${name}.log`);
  const fd = openSync(logFile, "a");
  // Test and bench stacks are dev stacks: their short client keys (`e2e-client-key-0001`) are
  // accepted (API_KEYS_ALLOW_SHORT; a production gateway refuses keys under 32 characters).
  // PIPELINE_CPU_PROF_DIR (bench/profile.ts): each app writes a CPU profile (.cpuprofile and a
  // markdown summary) into <dir>/<name> when it exits.
  const profDir = process.env.PIPELINE_CPU_PROF_DIR;
  const prof = profDir ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${join(profDir, name)}`] : [];
  const p = Bun.spawn([...prefix, BUN, ...prof, isAbsolute(script) ? script : join(ROOT, script)], {
    cwd: ROOT,
    env: { API_KEYS_ALLOW_SHORT: "1", PIPELINE_ENV: "dev", ...process.env, ...env } as Record<string, string>,
    stdout: fd,
    stderr: fd,
  });
  return procOf(p, name, logFile);
}

/** A Bun subprocess as a `Proc` whose output is in `logFile`; `onKill` runs before a signal is sent. */
export function procOf(p: Bun.Subprocess, name: string, logFile: string, onKill?: () => void): Proc {
  return {
    name,
    pid: p.pid,
    logFile,
    exited: p.exited,
    exitCode: () => (p.killed || p.exitCode !== null || p.signalCode !== null ? (p.exitCode ?? null) : undefined),
    async kill(signal = "SIGTERM") {
      onKill?.();
      p.kill(signal);
      return p.exited;
    },
    log: () => readFileSync(logFile, "utf8"),
  };
}
