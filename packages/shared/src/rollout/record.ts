// The rollout record, pure (tested in apps/rollout/src/domain/plan.test.ts): what the rollout
// service (apps/rollout) keeps in the `rollout_control` KV bucket of its home region, key
// `current`, and the operators' commands on it.
// The rollout service, its CLI and the operator console all read and change it through this module
// (the write path is ./store.ts), so a command means the same wherever it is given.
//
// The record's shape (JSON, every write a compare-and-set on the KV revision):
//   id             `<version>-<yyyymmddhhmmss>` of the start
//   plan           version, stable, regions (in order), steps (percentages and "pause" markers),
//                  bakeMs, progressDeadlineMs, onInconclusive ("pause" | "rollback"), gate thresholds
//   state          running | paused | promoted | rolledBack | aborted (the last three: ended)
//   awaiting       only while paused by the rollout itself: "promotion" (at a pause step: `promote`
//                  goes on) or "decision" (inconclusive at the deadline: resume, promote or abort)
//   region, step   indexes into plan.regions and plan.steps of the step applied or being applied
//   stepStartedAt  epoch ms the step's shards moved (the bake and the deadline count from it)
//   reason         why it ended or paused (a rollback's reason names the gate figure at fault)
//   applied        whether the shards already match the record (false between a decision and its move)
//   log            the last LOG_KEEP decisions and commands: {at, action, region?, percent?, why, figures?}
//                  (`figures`: {canary, stable} as the gate measured them)
//   notified       keys of the notifications already handed on (the service's notify hook)
// A record written before pause steps and `awaiting` existed (numeric steps only) parses unchanged.
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

/** A step that waits for a person: the shards stay at the step before it until `promote`. */
export const PAUSE = "pause";
export const Step = z.union([z.number().int().min(1).max(100), z.literal(PAUSE)]);
export type Step = z.infer<typeof Step>;

/** Why a list of steps is not a plan's, or undefined when it is one. */
export function stepsProblem(steps: readonly Step[]): string | undefined {
  const nums = steps.filter((s): s is number => s !== PAUSE);
  if (!nums.every((v, i) => i === 0 || v > nums[i - 1]!) || steps.at(-1) !== 100)
    return "increasing percentages ending at 100";
  if (steps[0] === PAUSE) return "a pause step comes after a percentage, not first";
  if (steps.some((s, i) => s === PAUSE && steps[i - 1] === PAUSE)) return "two pause steps in a row";
  return undefined;
}

export const RolloutPlan = z
  .object({
    version: Version,
    /** The version the canary replaces (owns every shard when the rollout starts). */
    stable: Version,
    regions: z.array(z.string().min(1)).min(1),
    /**
     * Percent of shards per step, increasing, ending at 100; a "pause" between two holds the
     * percentage before it until a person promotes (not first, not last, not twice in a row).
     */
    steps: z
      .array(Step)
      .min(1)
      .superRefine((s, ctx) => {
        const problem = stepsProblem(s);
        if (problem) ctx.addIssue({ code: "custom", message: problem });
      }),
    /** How long each step bakes before its gate is read. */
    bakeMs: z.number().int().min(1000).default(60_000),
    /** A step whose gate has not passed this long after it began rolls back (or pauses: onInconclusive). */
    progressDeadlineMs: z.number().int().min(1000).default(600_000),
    /**
     * At the deadline, when the gate only waited for traffic (fewer canary tasks than minTasks):
     * "pause" (a person decides) or "rollback". A failing gate rolls back either way.
     */
    onInconclusive: z.enum(["pause", "rollback"]).default("pause"),
    gate: GateThresholds,
  })
  .strict();
export type RolloutPlan = z.infer<typeof RolloutPlan>;

export const RolloutState = z.enum(["running", "paused", "promoted", "rolledBack", "aborted"]);
export type RolloutState = z.infer<typeof RolloutState>;

/** What a rollout paused by itself waits for: promotion past a pause step, or a decision on an inconclusive step. */
export const Awaiting = z.enum(["promotion", "decision"]);
export type Awaiting = z.infer<typeof Awaiting>;

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
export const NOTIFIED_KEEP = 32;

export const Rollout = z
  .object({
    id: z.string().min(1),
    plan: RolloutPlan,
    state: RolloutState,
    /** Set only while paused by the rollout itself (a pause step, an inconclusive step). */
    awaiting: Awaiting.optional(),
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
    /** Keys of the notifications handed on already (none written by a service without a notify hook). */
    notified: z.array(z.string()).max(NOTIFIED_KEEP).optional(),
  })
  .strict();
export type Rollout = z.infer<typeof Rollout>;

export const ENDED: readonly RolloutState[] = ["promoted", "rolledBack", "aborted"];
export const isEnded = (r: Pick<Rollout, "state">) => ENDED.includes(r.state);

/** The percentage of step `i`: its own, or for a pause step the one before it (0 before the first). */
export function percentAt(steps: readonly Step[], i: number): number {
  for (let j = Math.min(i, steps.length - 1); j >= 0; j--) {
    const s = steps[j]!;
    if (s !== PAUSE) return s;
  }
  return 0;
}

export const isPauseStep = (plan: Pick<RolloutPlan, "steps">, i: number) => plan.steps[i] === PAUSE;

/** `5/pause/25/50/100%`: the steps as the log and the CLI write them. */
export const stepsText = (steps: readonly Step[]) => `${steps.join("/")}%`;

/**
 * The percent of `plan.regions[i]`'s shards the canary owns in this record: regions before the
 * current one are done (100), the current one is at its step (a pause step holds the one before),
 * later ones untouched (0). A rolled back or aborted rollout gives every region back to the stable
 * version (the canary drained everywhere); a promoted one leaves the canary everywhere.
 */
export function desiredPercent(r: Pick<Rollout, "state" | "region" | "step" | "plan">, i: number): number {
  if (r.state === "promoted") return 100;
  if (r.state === "rolledBack" || r.state === "aborted") return 0;
  if (i < r.region) return 100;
  if (i > r.region) return 0;
  return percentAt(r.plan.steps, r.step);
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
      notified: [],
    },
    {
      action: "start",
      why: `${plan.version} replaces ${plan.stable} in ${plan.regions.join(" then ")}, steps ${stepsText(plan.steps)}`,
    },
    now,
  );
}

export const COMMANDS = ["pause", "resume", "promote", "abort"] as const;
export type CommandVerb = (typeof COMMANDS)[number];

/** The record without `awaiting` (a command or a decision that ends the wait). */
function unawaited(r: Rollout): Rollout {
  const { awaiting: _, ...rest } = r;
  return rest;
}

/** `promote`: past a pause step to the next step, or (elsewhere, or `full`) straight to 100 % in the current region. */
function promote(r: Rollout, nowMs: number, by: string, full: boolean): Rollout {
  const base = { ...unawaited(r), state: "running" as const, stepStartedAt: nowMs, applied: false };
  if (r.awaiting === "promotion" && !full) {
    const region = r.plan.regions[r.region];
    const after = percentAt(r.plan.steps, r.step);
    return { ...base, step: r.step + 1, reason: `promoted by ${by} past the pause after ${after}% in ${region}` };
  }
  // Straight to 100% in the current region; the next tick judges it like any step.
  return { ...base, step: r.plan.steps.length - 1, reason: `promoted by ${by}` };
}

/**
 * Operator commands on a rollout record: what they change, or why they are refused. `promote` at
 * a pause step goes on to the next step (`full`: to 100 % in the current region, as elsewhere).
 * `resume` restarts a step paused by a person or left inconclusive, not a pause step (promote it).
 */
export function command(
  r: Rollout,
  cmd: CommandVerb,
  nowMs: number,
  by: string,
  o: { full?: boolean } = {},
): { next: Rollout } | { refused: string } {
  if (isEnded(r)) return { refused: `the rollout is ${r.state}` };
  switch (cmd) {
    case "pause":
      return r.state === "paused"
        ? { refused: r.awaiting === "promotion" ? "already paused (waiting for promotion)" : "already paused" }
        : { next: { ...unawaited(r), state: "paused", reason: `paused by ${by}` } };
    case "resume":
      if (r.state !== "paused") return { refused: "not paused" };
      if (r.awaiting === "promotion")
        return { refused: "it waits at a pause step: promote goes on to the next step, abort ends it" };
      // The bake starts again: what happened while paused is not judged by the paused step's clock.
      return { next: { ...unawaited(r), state: "running", stepStartedAt: nowMs, reason: `resumed by ${by}` } };
    case "abort":
      // Every region back to the stable version.
      return { next: { ...unawaited(r), state: "aborted", reason: `aborted by ${by}`, applied: false } };
    case "promote":
      return { next: promote(r, nowMs, by, o.full === true) };
  }
}
