// A rollout as data and its decisions, pure (plan.test.ts). The service (../controller.ts) keeps the
// record in the `rollout_control` KV bucket, calls `decide` on every tick with the gate's figures
// and the clock, writes the next record (compare-and-set) with `applied: false`, then moves the
// shards to `desiredPercent` in every region and marks it applied. Killed at any moment, it reads
// the record back: an unapplied record is applied again (moves are idempotent).
import { z } from "zod";

const Version = z.string().regex(/^[a-z0-9_]{1,32}$/, "lower-case letters, digits and '_'");

export const GateThresholds = z
  .object({
    /** Canary task failure rate may exceed the stable one by at most this (absolute, 0..1). */
    maxFailureRateIncrease: z.number().min(0).max(1).default(0.02),
    /** Canary provider error rate (errors / provider calls) may exceed the stable one by at most this. */
    maxProviderErrorRateIncrease: z.number().min(0).max(1).default(0.05),
    /**
     * Extra paid submissions (beyond one per task) the canary may make in a window on top of what
     * the stable version's rate predicts for as many tasks (the provider's own "unsolvable"
     * resubmissions happen to both versions alike).
     */
    maxExtraPaid: z.number().int().min(0).default(0),
    /** Canary p95 solve time may be at most this multiple of the stable one... */
    maxP95Ratio: z.number().min(1).default(1.5),
    /** ...unless it is within this many milliseconds of it (noise on fast tasks). */
    minP95DeltaMs: z.number().int().min(0).default(1000),
    /** Canary processes lost (heartbeats gone) allowed in a window. */
    maxLostProcesses: z.number().int().min(0).default(0),
    /** A window with fewer canary tasks than this says nothing: the step waits. */
    minTasks: z.number().int().min(1).default(20),
    /**
     * Share of reported answers the sites refused (clients' `reportbad`) the canary may have
     * above the stable version's, once each has `minReports` reports in the window.
     */
    maxRejectionRateIncrease: z.number().min(0).max(1).default(0.1),
    minReports: z.number().int().min(1).default(10),
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
      .refine(
        (s) => s.every((v, i) => i === 0 || v > s[i - 1]!) && s.at(-1) === 100,
        "increasing percentages ending at 100",
      ),
    /** How long each step bakes before its gate is read. */
    bakeMs: z.number().int().min(1000).default(60_000),
    /** A step whose gate has not passed this long after it began rolls back. */
    progressDeadlineMs: z.number().int().min(1000).default(600_000),
    gate: GateThresholds,
  })
  .strict();
export type RolloutPlan = z.infer<typeof RolloutPlan>;

export const RolloutState = z.enum(["running", "paused", "promoted", "rolledBack", "aborted"]);
export type RolloutState = z.infer<typeof RolloutState>;

/** One line of a rollout's history: what was decided or done, why, and the gate figures behind it. */
export const LogEntry = z
  .object({
    at: z.string(),
    action: z.string(),
    region: z.string().optional(),
    percent: z.number().optional(),
    why: z.string(),
    figures: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
export type LogEntry = z.infer<typeof LogEntry>;
export const LOG_KEEP = 200;

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
    /** Whether the shards already match `desiredPercent` in every region (false between a decision and its move). */
    applied: z.boolean().default(false),
    createdAt: z.string().optional(),
    by: z.string().optional(),
    log: z.array(LogEntry).max(LOG_KEEP).default([]),
  })
  .strict();
export type Rollout = z.infer<typeof Rollout>;

export const ENDED: readonly RolloutState[] = ["promoted", "rolledBack", "aborted"];
export const isEnded = (r: Pick<Rollout, "state">) => ENDED.includes(r.state);

/**
 * The percent of `plan.regions[i]`'s shards the canary owns in this record: regions before the
 * current one are done (100), the current one is at its step, later ones untouched (0). A rolled
 * back or aborted rollout gives every region back to the stable version (the canary drained
 * everywhere); a promoted one leaves the canary everywhere.
 */
export function desiredPercent(r: Pick<Rollout, "state" | "region" | "step" | "plan">, i: number): number {
  if (r.state === "promoted") return 100;
  if (r.state === "rolledBack" || r.state === "aborted") return 0;
  if (i < r.region) return 100;
  if (i > r.region) return 0;
  return r.plan.steps[r.step]!;
}

/** The record with `entry` appended to its history (the oldest dropped past LOG_KEEP). */
export function withLog(r: Rollout, entry: Omit<LogEntry, "at">, now: Date): Rollout {
  return { ...r, log: [...r.log, { at: now.toISOString(), ...entry }].slice(-LOG_KEEP) };
}

/**
 * A new rollout of `plan`, running at its first step in its first region, not applied yet (the
 * service moves the shards), its id the version and the start time (`v2-20250101120000`).
 */
export function newRollout(plan: RolloutPlan, now: Date, by: string): Rollout {
  return withLog(
    {
      id: `${plan.version}-${now
        .toISOString()
        .replace(/[-:.TZ]/g, "")
        .slice(0, 14)}`,
      plan,
      state: "running",
      region: 0,
      step: 0,
      stepStartedAt: now.getTime(),
      applied: false,
      createdAt: now.toISOString(),
      by,
      log: [],
    },
    {
      action: "start",
      why: `${plan.version} replaces ${plan.stable} in ${plan.regions.join(" then ")}, steps ${plan.steps.join("/")}%`,
    },
    now,
  );
}

/** What one gate window saw for one version (from the tasks' rows and the heartbeats). */
export interface VersionFigures {
  tasks: number;
  failed: number;
  providerCalls: number;
  providerErrors: number;
  /** Provider submissions beyond one per solved task. */
  extraPaid: number;
  /** What they cost at the list prices of their task types (micro-dollars; an estimate). */
  extraPaidMicros?: number;
  /** Answers the clients reported on, and how many of those the sites refused (`reportbad`). */
  reports?: number;
  rejected?: number;
  p95Ms: number | null;
  lostProcesses: number;
}

export type GateVerdict = { pass: true; why: string } | { pass: false; why: string } | { pass: "wait"; why: string };

const rate = (n: number, d: number) => (d === 0 ? 0 : n / d);
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** The canary against the stable version over the same window: pass, fail (with the figure), or wait for traffic. */
export function gateVerdict(canary: VersionFigures, stable: VersionFigures, t: GateThresholds): GateVerdict {
  // Failures that need no volume to be meaningful come first.
  const expectedExtra = Math.floor(rate(stable.extraPaid, stable.tasks) * canary.tasks);
  if (canary.extraPaid - expectedExtra > t.maxExtraPaid)
    return {
      pass: false,
      why: `extra paid submissions ${canary.extraPaid}${money(canary.extraPaidMicros)}${expectedExtra ? ` (stable's rate: ${expectedExtra})` : ""} > ${t.maxExtraPaid}`,
    };
  if (canary.lostProcesses > t.maxLostProcesses)
    return { pass: false, why: `canary processes lost ${canary.lostProcesses} > ${t.maxLostProcesses}` };
  const rejection = rejectionVerdict(canary, stable, t);
  if (rejection) return rejection;
  if (canary.tasks < t.minTasks)
    return { pass: "wait", why: `canary handled ${canary.tasks} task(s) in the window, fewer than ${t.minTasks}` };
  const fr = rate(canary.failed, canary.tasks) - rate(stable.failed, stable.tasks);
  if (fr > t.maxFailureRateIncrease)
    return {
      pass: false,
      why: `task failure rate ${pct(rate(canary.failed, canary.tasks))} vs stable ${pct(rate(stable.failed, stable.tasks))}`,
    };
  const er = rate(canary.providerErrors, canary.providerCalls) - rate(stable.providerErrors, stable.providerCalls);
  if (er > t.maxProviderErrorRateIncrease)
    return {
      pass: false,
      why: `provider error rate ${pct(rate(canary.providerErrors, canary.providerCalls))} vs stable ${pct(rate(stable.providerErrors, stable.providerCalls))}`,
    };
  if (
    canary.p95Ms !== null &&
    stable.p95Ms !== null &&
    stable.p95Ms > 0 &&
    canary.p95Ms / stable.p95Ms > t.maxP95Ratio &&
    canary.p95Ms - stable.p95Ms > t.minP95DeltaMs
  )
    return { pass: false, why: `p95 solve time ${canary.p95Ms} ms vs stable ${stable.p95Ms} ms (> ${t.maxP95Ratio}x)` };
  return {
    pass: true,
    why: `failure ${pct(rate(canary.failed, canary.tasks))} (stable ${pct(rate(stable.failed, stable.tasks))}), ${canary.tasks} tasks, extra paid ${canary.extraPaid}${money(canary.extraPaidMicros)}`,
  };
}

/** ` ($0.00290)`: extra money at list prices, when known. */
const money = (micros: number | undefined) => (micros ? ` ($${(micros / 1_000_000).toFixed(5)})` : "");

/** The sites refuse more of the canary's answers than of the stable version's (enough reports on both). */
function rejectionVerdict(canary: VersionFigures, stable: VersionFigures, t: GateThresholds): GateVerdict | undefined {
  const c = canary.reports ?? 0;
  const s = stable.reports ?? 0;
  if (c < t.minReports || s < t.minReports) return undefined;
  const cr = rate(canary.rejected ?? 0, c);
  const sr = rate(stable.rejected ?? 0, s);
  if (cr - sr <= t.maxRejectionRateIncrease) return undefined;
  return { pass: false, why: `answers refused by the sites ${pct(cr)} of ${c} reported vs stable ${pct(sr)} of ${s}` };
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
 * never two regions at once. A failed gate or a passed deadline rolls the rollout back: every
 * region's shards go back to the stable version (desiredPercent).
 */
export function decide(r: Rollout, nowMs: number, verdict: GateVerdict | undefined): Action {
  if (r.state !== "running") return { kind: "wait", why: `rollout ${r.state}` };
  const region = r.plan.regions[r.region]!;
  const overdue = nowMs - r.stepStartedAt > r.plan.progressDeadlineMs;
  if (verdict?.pass === false || (overdue && verdict?.pass !== true)) {
    const why =
      verdict?.pass === false
        ? `gate failed in ${region} at ${r.plan.steps[r.step]}%: ${verdict.why}`
        : `no passing gate in ${region} at ${r.plan.steps[r.step]}% within ${r.plan.progressDeadlineMs} ms`;
    return {
      kind: "rollback",
      region,
      toStable: r.plan.stable,
      next: { ...r, state: "rolledBack", reason: why, applied: false },
    };
  }
  if (nowMs - r.stepStartedAt < r.plan.bakeMs || !verdict || verdict.pass === "wait")
    return { kind: "wait", why: verdict?.why ?? "baking" };
  // The gate passed: the next step, the next region, or the end.
  if (r.step + 1 < r.plan.steps.length) {
    const next = { ...r, step: r.step + 1, stepStartedAt: nowMs, applied: false };
    return { kind: "shift", region, version: r.plan.version, percent: r.plan.steps[r.step + 1]!, next };
  }
  if (r.region + 1 < r.plan.regions.length) {
    const next = { ...r, region: r.region + 1, step: 0, stepStartedAt: nowMs, applied: false };
    return {
      kind: "shift",
      region: r.plan.regions[r.region + 1]!,
      version: r.plan.version,
      percent: r.plan.steps[0]!,
      next,
    };
  }
  return {
    kind: "done",
    next: { ...r, state: "promoted", reason: `promoted in ${r.plan.regions.join(", ")}`, applied: false },
  };
}

/** Operator commands on a rollout record: what they change, or why they are refused. */
export function command(
  r: Rollout,
  cmd: "pause" | "resume" | "abort" | "promote",
  nowMs: number,
  by: string,
): { next: Rollout } | { refused: string } {
  const ended = r.state === "promoted" || r.state === "rolledBack" || r.state === "aborted";
  if (ended) return { refused: `the rollout is ${r.state}` };
  switch (cmd) {
    case "pause":
      return r.state === "paused"
        ? { refused: "already paused" }
        : { next: { ...r, state: "paused", reason: `paused by ${by}` } };
    case "resume":
      // The bake starts again: what happened while paused is not judged by the paused step's clock.
      return r.state !== "paused"
        ? { refused: "not paused" }
        : { next: { ...r, state: "running", stepStartedAt: nowMs, reason: `resumed by ${by}` } };
    case "abort":
      // Every region back to the stable version.
      return { next: { ...r, state: "aborted", reason: `aborted by ${by}`, applied: false } };
    case "promote":
      // Straight to 100% in the current region; the next tick judges it like any step.
      return {
        next: {
          ...r,
          state: "running",
          step: r.plan.steps.length - 1,
          stepStartedAt: nowMs,
          reason: `promoted by ${by}`,
          applied: false,
        },
      };
  }
}
