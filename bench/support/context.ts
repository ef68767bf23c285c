import { z } from "zod";
import type { Figure } from "./report.ts";
import type { Scope } from "./scope.ts";

/** What every benchmark gets from run.ts. */
export interface BenchContext {
  /** Admin URL of the run's one Postgres cluster (real commits: fsync on). */
  pgAdminUrl: string;
  /** Its data folder (to find its processes, for CPU accounting). */
  pgDataDir: string;
  /** Where the processes a benchmark starts write their logs (kept when the run fails). */
  logDir: string;
  /** Stops what the benchmark started, when it ends. */
  scope: Scope;
  log(message: string): void;
  /** Figures of the benchmarks already run in this process (the latency one reads end-to-end's). */
  earlier: Figure[];
  /** Facts worth keeping in the JSON beside the figures (timings of phases, counters). */
  detail: Record<string, unknown>;
}

export interface Benchmark {
  name: string;
  /** One line: what it measures. */
  title: string;
  run(ctx: BenchContext): Promise<Figure[]>;
}

/** A positive integer from the environment (to shrink a benchmark on a slow machine), or the default. */
export function envCount(name: string, def: number): number {
  const v = Number(process.env[name]);
  return Number.isInteger(v) && v > 0 ? v : def;
}

/**
 * A process's settings given as a JSON object of strings in `name` (`'{"GC_GROWTH_MB":"8"}'`);
 * `{}` when unset. Bad JSON or a value that is not a string is an error naming the variable.
 */
export function envSettings(name: string): Record<string, string> {
  const raw = process.env[name];
  if (!raw) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new Error(`${name}: not JSON (${(err as Error).message})`);
  }
  const r = z.record(z.string(), z.string()).safeParse(parsed);
  if (!r.success) throw new Error(`${name}: a JSON object of strings (${r.error.issues[0]?.message})`);
  return r.data;
}
