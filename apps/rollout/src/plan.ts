// A rollout as data and its decisions, pure (plan.test.ts). The service (not built yet) stores the
// record in `rollout_<region>` KV with its history, calls `decide` on every tick with the gate's
// figures and the clock, applies the returned action (shiftTo / shiftAll in shift.ts), and writes
// the next record; killed at any moment, it reads the record back and decides again.
import { z } from "zod";

const Version = z.string().regex(/^[a-z0-9_]{1,32}$/, "lower-case letters, digits and '_'");

export const GateThresholds = z
  .object({
    /** Canary task failure rate may exceed the stable one by at most this (absolute, 0..1). */
    maxFailureRateIncrease: z.number().min(0).max(1).default(0.02),
    /** Canary provider error rate (errors / provider calls) may exceed the stable one by at most this. */
    maxProviderErrorRateIncrease: z.number().min(0).max(1).default(0.05),
    /** Extra paid submissions (submissions beyond one per solved task) allowed to the canary in a window. */
    maxExtraPaid: z.number().int().min(0).default(0),
    /** Canary p95 solve time may be at most this multiple of the stable one. */
    maxP95Ratio: z.number().min(1).default(1.5),
    /** Canary processes lost (heartbeats gone) allowed in a window. */
    maxLostProcesses: z.number().int().min(0).default(0),
    /** A window with fewer canary tasks than this says nothing: the step waits. */
    minTasks: z.number().int().min(1).default(20),
  })
  .strict();
export type GateThresholds = z.infer<typeof GateThresholds>;

export const RolloutPlan = z
  .object({
    version: Version,
    /** The version the canary replaces (owns every shard when the rollout starts). */
    stable: Version,
    regions: z.array(z.string().min(1)).min(1),
    /** Percent of shards per step, increasing, ending at 100. */
    steps: z
      .array(z.number().int().min(1).max(100))
      .min(1)
      .refine((s) => s.every((v, i) => i === 0 || v > s[i - 1]!) && s.at(-1) === 100, "increasing percentages ending at 100"),
    /** How long each step bakes before its gate is read. */
    bakeMs: z.number().int().min(1000).default(60_000),
    /** A step whose gate has not passed this long after it began rolls back. */
    progressDeadlineMs: z.number().int().min(1000).default(600_000),
    gate: GateThresholds,
  })
  .strict();
export type RolloutPlan = z.infer<typeof RolloutPlan>;

export const RolloutState = z.enum(["running", "paused", "promoted", "rolledBack", "aborted"]);
export const Rollout = z
  .object({
    id: z.string().min(1),
    plan: RolloutPlan,
    state: RolloutState,
    /** Index into plan.regions and plan.steps of the step applied or being applied. */
    region: z.number().int().min(0),
    step: z.number().int().min(0),
    /** When the current step's shards were moved (epoch ms); the bake and the deadline count from here. */
    stepStartedAt: z.number().int(),
    /** Why it ended or paused, with the gate's figures that decided it. */
    reason: z.string().optional(),
  })
  .strict();
export type Rollout = z.infer<typeof Rollout>;

/** What one gate window saw for one version (from the tasks' rows and the heartbeats). */
export interface VersionFigures {
  tasks: number;
  failed: number;
  providerCalls: number;
  providerErrors: number;
  /** Provider submissions beyond one per solved task. */
  extraPaid: number;
  p95Ms: number | null;
  lostProcesses: number;
}

export type GateVerdict = { pass: true; why: string } | { pass: false; why: string } | { pass: "wait"; why: string };

const rate = (n: number, d: number) => (d === 0 ? 0 : n / d);
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** The canary against the stable version over the same window: pass, fail (with the figure), or wait for traffic. */
export function gateVerdict(canary: VersionFigures, stable: VersionFigures, t: GateThresholds): GateVerdict {
  // Failures that need no volume to be meaningful come first.
  if (canary.extraPaid > t.maxExtraPaid) return { pass: false, why: `extra paid submissions ${canary.extraPaid} > ${t.maxExtraPaid}` };
  if (canary.lostProcesses > t.maxLostProcesses) return { pass: false, why: `canary processes lost ${canary.lostProcesses} > ${t.maxLostProcesses}` };
  if (canary.tasks < t.minTasks) return { pass: "wait", why: `canary handled ${canary.tasks} task(s) in the window, fewer than ${t.minTasks}` };
  const fr = rate(canary.failed, canary.tasks) - rate(stable.failed, stable.tasks);
  if (fr > t.maxFailureRateIncrease) return { pass: false, why: `task failure rate ${pct(rate(canary.failed, canary.tasks))} vs stable ${pct(rate(stable.failed, stable.tasks))}` };
  const er = rate(canary.providerErrors, canary.providerCalls) - rate(stable.providerErrors, stable.providerCalls);
  if (er > t.maxProviderErrorRateIncrease) return { pass: false, why: `provider error rate ${pct(rate(canary.providerErrors, canary.providerCalls))} vs stable ${pct(rate(stable.providerErrors, stable.providerCalls))}` };
  if (canary.p95Ms !== null && stable.p95Ms !== null && stable.p95Ms > 0 && canary.p95Ms / stable.p95Ms > t.maxP95Ratio)
    return { pass: false, why: `p95 solve time ${canary.p95Ms} ms vs stable ${stable.p95Ms} ms (> ${t.maxP95Ratio}x)` };
  return { pass: true, why: `failure ${pct(rate(canary.failed, canary.tasks))} (stable ${pct(rate(stable.failed, stable.tasks))}), ${canary.tasks} tasks, extra paid ${canary.extraPaid}` };
}

/** What the service does next. */
export type Action =
  | { kind: "wait"; why: string }
  | { kind: "shift"; region: string; version: string; percent: number; next: Rollout }
  | { kind: "rollback"; region: string; toStable: string; next: Rollout }
  | { kind: "done"; next: Rollout };

/**
 * One tick of a running rollout. `verdict` is the gate over the current step's window (undefined
 * while it bakes). Steps go region by region: every step in the first region, then the second;
 * never two regions at once. A failed gate or a passed deadline rolls the current region back (the
 * regions already promoted stay on the new version: the operator decides, see README).
 */
export function decide(r: Rollout, nowMs: number, verdict: GateVerdict | undefined): Action {
  if (r.state !== "running") return { kind: "wait", why: `rollout ${r.state}` };
  const region = r.plan.regions[r.region]!;
  const overdue = nowMs - r.stepStartedAt > r.plan.progressDeadlineMs;
  if (verdict?.pass === false || (overdue && verdict?.pass !== true)) {
    const why = verdict?.pass === false ? `gate failed in ${region} at ${r.plan.steps[r.step]}%: ${verdict.why}` : `no passing gate in ${region} at ${r.plan.steps[r.step]}% within ${r.plan.progressDeadlineMs} ms`;
    return { kind: "rollback", region, toStable: r.plan.stable, next: { ...r, state: "rolledBack", reason: why } };
  }
  if (nowMs - r.stepStartedAt < r.plan.bakeMs || !verdict || verdict.pass === "wait") return { kind: "wait", why: verdict?.why ?? "baking" };
  // The gate passed: the next step, the next region, or the end.
  if (r.step + 1 < r.plan.steps.length) {
    const next = { ...r, step: r.step + 1, stepStartedAt: nowMs };
    return { kind: "shift", region, version: r.plan.version, percent: r.plan.steps[r.step + 1]!, next };
  }
  if (r.region + 1 < r.plan.regions.length) {
    const next = { ...r, region: r.region + 1, step: 0, stepStartedAt: nowMs };
    return { kind: "shift", region: r.plan.regions[r.region + 1]!, version: r.plan.version, percent: r.plan.steps[0]!, next };
  }
  return { kind: "done", next: { ...r, state: "promoted", reason: `promoted in ${r.plan.regions.join(", ")}` } };
}

/** Operator commands on a rollout record: what they change, or why they are refused. */
export function command(r: Rollout, cmd: "pause" | "resume" | "abort" | "promote", nowMs: number, by: string): { next: Rollout } | { refused: string } {
  const ended = r.state === "promoted" || r.state === "rolledBack" || r.state === "aborted";
  if (ended) return { refused: `the rollout is ${r.state}` };
  switch (cmd) {
    case "pause":
      return r.state === "paused" ? { refused: "already paused" } : { next: { ...r, state: "paused", reason: `paused by ${by}` } };
    case "resume":
      // The bake starts again: what happened while paused is not judged by the paused step's clock.
      return r.state !== "paused" ? { refused: "not paused" } : { next: { ...r, state: "running", stepStartedAt: nowMs, reason: `resumed by ${by}` } };
    case "abort":
      return { next: { ...r, state: "aborted", reason: `aborted by ${by}` } };
    case "promote":
      // Straight to 100% in the current region; the next tick judges it like any step.
      return { next: { ...r, state: "running", step: r.plan.steps.length - 1, stepStartedAt: nowMs, reason: `promoted by ${by}` } };
  }
}
