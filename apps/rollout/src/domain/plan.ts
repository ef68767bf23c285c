// A rollout as data and its decisions, pure (plan.test.ts). The record, its commands and
// desiredPercent live in @pipeline/shared/rollout (the operator console changes the record too);
// this file adds the gate verdict and `decide`. The service (../controller.ts) keeps the record in
// the `rollout_control` KV bucket, calls `decide` on every tick with the gate's figures and the
// clock, writes the next record (compare-and-set) with `applied: false`, then moves the shards to
// `desiredPercent` in every region and marks it applied. Killed at any moment, it reads the record
// back: an unapplied record is applied again (moves are idempotent).
import { type GateThresholds, isPauseStep, percentAt, type Rollout } from "@pipeline/shared/rollout";

export {
  type CommandVerb,
  command,
  desiredPercent,
  ENDED,
  GateThresholds,
  isEnded,
  LOG_KEEP,
  LogEntry,
  newRollout,
  PAUSE,
  percentAt,
  Rollout,
  RolloutPlan,
  RolloutState,
  Step,
  stepsText,
  withLog,
} from "@pipeline/shared/rollout";

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

/** A verdict; a wait for too little canary traffic says how much there was and how much it needs. */
export type GateVerdict =
  | { pass: true; why: string }
  | { pass: false; why: string }
  | { pass: "wait"; why: string; traffic?: { tasks: number; need: number } };

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
    return {
      pass: "wait",
      why: `canary handled ${canary.tasks} task(s) in the window, fewer than ${t.minTasks}`,
      traffic: { tasks: canary.tasks, need: t.minTasks },
    };
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
  /** A pause step reached (its gate passed): the rollout waits for a person's `promote`; nothing moves. */
  | { kind: "await"; region: string; percent: number; next: Rollout }
  /** The deadline passed with too little traffic to judge (onInconclusive "pause"): a person decides; nothing moves. */
  | { kind: "inconclusive"; region: string; percent: number; next: Rollout }
  | { kind: "done"; next: Rollout };

/**
 * At the progress deadline without a passing gate: a rollback, or (onInconclusive "pause", the gate
 * only waiting for traffic) a pause that waits for a person's decision, the shards where they are.
 */
function overdue(r: Rollout, region: string, verdict: GateVerdict | undefined): Action {
  const pct = percentAt(r.plan.steps, r.step);
  if (r.plan.onInconclusive === "pause" && verdict?.pass === "wait" && verdict.traffic) {
    const { tasks, need } = verdict.traffic;
    const reason = `inconclusive: too little traffic (${tasks} tasks, need ${need}) in ${region} at ${pct}%`;
    return {
      kind: "inconclusive",
      region,
      percent: pct,
      next: { ...r, state: "paused", awaiting: "decision", reason },
    };
  }
  const why = `no passing gate in ${region} at ${pct}% within ${r.plan.progressDeadlineMs} ms`;
  return {
    kind: "rollback",
    region,
    toStable: r.plan.stable,
    next: { ...r, state: "rolledBack", reason: why, applied: false },
  };
}

/**
 * One tick of a running rollout. `verdict` is the gate over the current step's window (undefined
 * while it bakes). Steps go region by region: every step in the first region, then the second;
 * never two regions at once. A failed gate rolls the rollout back: every region's shards go back
 * to the stable version (desiredPercent); so does a passed deadline, unless the gate only lacked
 * traffic and the plan says to pause then. A pause step after a passed gate waits for `promote`.
 */
export function decide(r: Rollout, nowMs: number, verdict: GateVerdict | undefined): Action {
  if (r.state !== "running") return { kind: "wait", why: `rollout ${r.state}` };
  const region = r.plan.regions[r.region]!;
  const pct = percentAt(r.plan.steps, r.step);
  if (verdict?.pass === false) {
    const why = `gate failed in ${region} at ${pct}%: ${verdict.why}`;
    return {
      kind: "rollback",
      region,
      toStable: r.plan.stable,
      next: { ...r, state: "rolledBack", reason: why, applied: false },
    };
  }
  if (nowMs - r.stepStartedAt > r.plan.progressDeadlineMs && verdict?.pass !== true) return overdue(r, region, verdict);
  if (nowMs - r.stepStartedAt < r.plan.bakeMs || !verdict || verdict.pass === "wait")
    return { kind: "wait", why: verdict?.why ?? "baking" };
  // The gate passed: a pause step, the next step, the next region, or the end.
  if (isPauseStep(r.plan, r.step + 1)) {
    const reason = `waiting for promotion after ${pct}% in ${region}`;
    const next: Rollout = {
      ...r,
      step: r.step + 1,
      state: "paused",
      awaiting: "promotion",
      stepStartedAt: nowMs,
      reason,
    };
    return { kind: "await", region, percent: pct, next };
  }
  if (r.step + 1 < r.plan.steps.length) {
    const next = { ...r, step: r.step + 1, stepStartedAt: nowMs, applied: false };
    return { kind: "shift", region, version: r.plan.version, percent: percentAt(r.plan.steps, r.step + 1), next };
  }
  if (r.region + 1 < r.plan.regions.length) {
    const next = { ...r, region: r.region + 1, step: 0, stepStartedAt: nowMs, applied: false };
    return {
      kind: "shift",
      region: r.plan.regions[r.region + 1]!,
      version: r.plan.version,
      percent: percentAt(r.plan.steps, 0),
      next,
    };
  }
  return {
    kind: "done",
    next: { ...r, state: "promoted", reason: `promoted in ${r.plan.regions.join(", ")}`, applied: false },
  };
}
