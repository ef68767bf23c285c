// The soak's settings, from the environment (zod-checked): how long, how fast, how often a solver
// is killed, how often every process is sampled and how long a process warms up before its
// figures count. `npm run soak` takes the defaults (30 minutes, 20 tasks/s, a kill every 5
// minutes, a sample a minute, 5 minutes of warm-up); tests/soak.test.ts shrinks them to ~2 minutes.
import { z } from "zod";

export interface SoakSettings {
  /** How long tasks are offered. */
  durationMs: number;
  /** Tasks offered per second. */
  rate: number;
  /** A solver is killed (-9) and started again this often. */
  killEveryMs: number;
  sampleEveryMs: number;
  /** A process's figures count from its first sample this long after it started. */
  warmupMs: number;
  /** Solver processes running at once. */
  solvers: number;
  /** How long the tasks still open when the offering stops may take to finish. */
  drainMs: number;
  /** Where the result is written as JSON (tests/soak.test.ts reads it), if anywhere. */
  jsonFile: string | undefined;
}

const positive = z.coerce.number().positive();
const Env = z.object({
  SOAK_MINUTES: positive.default(30),
  SOAK_RATE: positive.default(20),
  SOAK_KILL_EVERY_MIN: positive.default(5),
  SOAK_KILL_EVERY_SEC: positive.optional(),
  SOAK_SAMPLE_SEC: positive.default(60),
  SOAK_WARMUP_MIN: z.coerce.number().nonnegative().default(5),
  SOAK_WARMUP_SEC: z.coerce.number().nonnegative().optional(),
  SOAK_SOLVERS: z.coerce.number().int().min(2).default(2),
  SOAK_DRAIN_SEC: positive.default(120),
  SOAK_JSON: z.string().min(1).optional(),
});

/** The settings from `env`; a bad value throws naming the variable. */
export function soakSettings(env: Record<string, string | undefined> = process.env): SoakSettings {
  const parsed = Env.safeParse(Object.fromEntries(Object.entries(env).filter(([k, v]) => k.startsWith("SOAK_") && v)));
  if (!parsed.success)
    throw new Error(`soak settings: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  const e = parsed.data;
  return {
    durationMs: e.SOAK_MINUTES * 60_000,
    rate: e.SOAK_RATE,
    killEveryMs: (e.SOAK_KILL_EVERY_SEC ?? e.SOAK_KILL_EVERY_MIN * 60) * 1000,
    sampleEveryMs: e.SOAK_SAMPLE_SEC * 1000,
    warmupMs: (e.SOAK_WARMUP_SEC ?? e.SOAK_WARMUP_MIN * 60) * 1000,
    solvers: e.SOAK_SOLVERS,
    drainMs: e.SOAK_DRAIN_SEC * 1000,
    jsonFile: e.SOAK_JSON,
  };
}
