// `rollout start <version> [--steps 5,25,50,100] [--regions fsn1,hel1] [--stable v1] [--bake 60s]
// [--deadline 10m] [--on-inconclusive pause|rollback] [--gate minTasks=20,maxP95Ratio=1.5]`: parsed
// into a plan, or an error that names the option at fault (start-args.test.ts). A step of `--steps`
// is a percentage or `pause` (`5,pause,25,50,100`: wait for a person's promote after 5 %).
import { describeIssues } from "@pipeline/shared/schemas";
import { z } from "zod";
import { PAUSE, RolloutPlan, type Step } from "./plan.ts";

export const DEFAULT_STEPS: Step[] = [5, 25, 50, 100];

/** `250ms`, `30s`, `10m`, `1h` or a number of milliseconds. */
export function parseDuration(s: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(s.trim());
  if (!m) throw new Error(`${JSON.stringify(s)} is not a duration (250ms, 30s, 10m, 1h)`);
  const n = Number(m[1]);
  return Math.round(n * ({ ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const)[(m[2] ?? "ms") as "ms"]);
}

export interface StartArgs {
  version: string;
  stable?: string | undefined;
  regions?: string[] | undefined;
  steps: Step[];
  bakeMs?: number | undefined;
  onInconclusive?: "pause" | "rollback" | undefined;
  progressDeadlineMs?: number | undefined;
  gate: Record<string, number>;
}

const OPTIONS = ["--steps", "--regions", "--stable", "--bake", "--deadline", "--on-inconclusive", "--gate"] as const;

/** One step of `--steps`: `pause`, or a percentage (`25` or `25%`). */
const stepOf = (x: string): Step =>
  x.trim() === PAUSE ? PAUSE : z.coerce.number().int().min(1).max(100).parse(x.trim().replace(/%$/, ""));

export function parseStartArgs(args: string[]): StartArgs {
  const [version, ...rest] = args;
  if (!version || version.startsWith("--")) throw new Error("start: takes <version> first");
  const opts: Record<string, string> = {};
  for (let i = 0; i < rest.length; i += 2) {
    const k = rest[i]!;
    if (!(OPTIONS as readonly string[]).includes(k))
      throw new Error(`start: unknown option ${JSON.stringify(k)} (${OPTIONS.join(", ")})`);
    const v = rest[i + 1];
    if (v === undefined) throw new Error(`start: ${k} needs a value`);
    opts[k] = v;
  }
  const field = <T>(name: string, f: () => T): T => {
    try {
      return f();
    } catch (err) {
      throw new Error(`start: ${name}: ${(err as Error).message}`);
    }
  };
  const steps = opts["--steps"] ? field("--steps", () => opts["--steps"]!.split(",").map(stepOf)) : DEFAULT_STEPS;
  const gate: Record<string, number> = {};
  if (opts["--gate"])
    for (const kv of opts["--gate"].split(",")) {
      const [k, v] = kv.split("=");
      if (!k || v === undefined || !Number.isFinite(Number(v)))
        throw new Error(`start: --gate: ${JSON.stringify(kv)} is not name=number`);
      gate[k] = Number(v);
    }
  return {
    version,
    stable: opts["--stable"],
    regions: opts["--regions"]
      ?.split(",")
      .map((r) => r.trim())
      .filter(Boolean),
    steps,
    bakeMs: opts["--bake"] ? field("--bake", () => parseDuration(opts["--bake"]!)) : undefined,
    progressDeadlineMs: opts["--deadline"] ? field("--deadline", () => parseDuration(opts["--deadline"]!)) : undefined,
    onInconclusive: opts["--on-inconclusive"]
      ? field("--on-inconclusive", () => z.enum(["pause", "rollback"]).parse(opts["--on-inconclusive"]))
      : undefined,
    gate,
  };
}

/** The plan the arguments describe, checked like a stored one; the error names the field. */
export function planOf(a: StartArgs, o: { stable: string; regions: string[] }): RolloutPlan {
  const r = RolloutPlan.safeParse({
    version: a.version,
    stable: a.stable ?? o.stable,
    regions: a.regions ?? o.regions,
    steps: a.steps,
    ...(a.bakeMs !== undefined ? { bakeMs: a.bakeMs } : {}),
    ...(a.progressDeadlineMs !== undefined ? { progressDeadlineMs: a.progressDeadlineMs } : {}),
    ...(a.onInconclusive !== undefined ? { onInconclusive: a.onInconclusive } : {}),
    gate: a.gate,
  });
  if (!r.success) throw new Error(`start: ${describeIssues(r.error, "(plan)")}`);
  if (r.data.version === r.data.stable) throw new Error(`start: ${r.data.version} is already the stable version`);
  return r.data;
}
