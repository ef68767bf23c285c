import { describe, expect, test } from "bun:test";
import {
  command,
  decide,
  desiredPercent,
  GateThresholds,
  gateVerdict,
  LOG_KEEP,
  newRollout,
  percentAt,
  Rollout,
  RolloutPlan,
  type VersionFigures,
  withLog,
} from "./plan.ts";

const t = GateThresholds.parse({});
const plan = RolloutPlan.parse({
  version: "v2",
  stable: "v1",
  regions: ["fsn1", "hel1"],
  steps: [5, 25, 50, 100],
  bakeMs: 10_000,
  progressDeadlineMs: 60_000,
  gate: {},
});
const start: Rollout = {
  id: "r1",
  plan,
  state: "running",
  region: 0,
  step: 0,
  stepStartedAt: 0,
  applied: true,
  log: [],
};
const figures = (o: Partial<VersionFigures> = {}): VersionFigures => ({
  tasks: 100,
  failed: 1,
  providerCalls: 200,
  providerErrors: 2,
  extraPaid: 0,
  p95Ms: 1000,
  lostProcesses: 0,
  ...o,
});
const pass = gateVerdict(figures(), figures(), t);

describe("a plan", () => {
  test("steps are increasing percentages ending at 100", () => {
    expect(RolloutPlan.safeParse({ ...plan, steps: [5, 25, 50] }).success).toBe(false);
    expect(RolloutPlan.safeParse({ ...plan, steps: [50, 25, 100] }).success).toBe(false);
    expect(RolloutPlan.safeParse({ ...plan, version: "V2" }).success).toBe(false);
  });
});

describe("the gate compares the canary with the stable version over the same window", () => {
  test("equal figures pass", () => expect(pass.pass).toBe(true));
  test("one extra paid submission fails at once, whatever the volume", () =>
    expect(gateVerdict(figures({ tasks: 3, extraPaid: 1 }), figures(), t)).toMatchObject({
      pass: false,
      why: "extra paid submissions 1 > 0",
    }));
  test("a lost canary process fails", () =>
    expect(gateVerdict(figures({ lostProcesses: 1 }), figures(), t).pass).toBe(false));
  test("too little canary traffic waits rather than judging", () =>
    expect(gateVerdict(figures({ tasks: 5 }), figures(), t).pass).toBe("wait"));
  test("a failure rate above the stable one by more than the threshold fails, naming both", () => {
    const v = gateVerdict(figures({ failed: 10 }), figures({ failed: 1 }), t);
    expect(v).toEqual({ pass: false, why: "task failure rate 10.0% vs stable 1.0%" });
  });
  test("a provider error rate above the stable one fails (a misconfigured provider URL or key)", () =>
    expect(gateVerdict(figures({ providerErrors: 150 }), figures(), t).pass).toBe(false));
  test("a p95 beyond the ratio fails", () =>
    expect(gateVerdict(figures({ p95Ms: 2500 }), figures({ p95Ms: 1000 }), t).pass).toBe(false));
  test("a p95 within the noise floor passes whatever the ratio", () =>
    expect(gateVerdict(figures({ p95Ms: 900 }), figures({ p95Ms: 300 }), t).pass).toBe(true));
  test("extra paid submissions are judged against the stable version's rate on as many tasks", () => {
    expect(gateVerdict(figures({ extraPaid: 3 }), figures({ extraPaid: 3 }), t).pass).toBe(true);
    expect(gateVerdict(figures({ extraPaid: 4 }), figures({ extraPaid: 3 }), t)).toEqual({
      pass: false,
      why: "extra paid submissions 4 (stable's rate: 3) > 0",
    });
  });
});

describe("a new rollout", () => {
  test("runs at the first step of the first region, unapplied, its id the version and the start time", () => {
    const r = newRollout(plan, new Date("2025-01-02T03:04:05.678Z"), "ops");
    expect(r).toMatchObject({
      id: "v2-20250102030405",
      state: "running",
      region: 0,
      step: 0,
      stepStartedAt: Date.parse("2025-01-02T03:04:05.678Z"),
      applied: false,
      by: "ops",
    });
    expect(r.log).toEqual([
      { at: "2025-01-02T03:04:05.678Z", action: "start", why: "v2 replaces v1 in fsn1 then hel1, steps 5/25/50/100%" },
    ]);
    expect(Rollout.safeParse(r).success).toBe(true);
  });
});

describe("a running rollout", () => {
  test("bakes, then takes the next step in the same region once its gate passes", () => {
    expect(decide(start, 5000, pass)).toMatchObject({ kind: "wait" });
    expect(decide(start, 10_000, undefined)).toMatchObject({ kind: "wait" });
    const a = decide(start, 10_000, pass);
    expect(a).toMatchObject({ kind: "shift", region: "fsn1", version: "v2", percent: 25 });
  });
  test("goes region by region: after 100% in fsn1, 5% in hel1; never both at once", () => {
    const last = { ...start, step: 3 };
    expect(decide(last, 20_000, pass)).toMatchObject({
      kind: "shift",
      region: "hel1",
      percent: 5,
      next: { region: 1, step: 0, stepStartedAt: 20_000 },
    });
  });
  test("after the last step of the last region: promoted", () => {
    expect(decide({ ...start, region: 1, step: 3 }, 20_000, pass)).toMatchObject({
      kind: "done",
      next: { state: "promoted" },
    });
  });
  test("a failed gate rolls the region back to the stable version, saying why", () => {
    const a = decide(start, 3000, gateVerdict(figures({ extraPaid: 2 }), figures(), t));
    expect(a).toMatchObject({
      kind: "rollback",
      region: "fsn1",
      toStable: "v1",
      next: { state: "rolledBack", reason: "gate failed in fsn1 at 5%: extra paid submissions 2 > 0" },
    });
  });
  test("no passing gate by the progress deadline rolls back too", () => {
    expect(decide(start, 61_000, { pass: "wait", why: "no traffic" })).toMatchObject({
      kind: "rollback",
      next: { reason: "no passing gate in fsn1 at 5% within 60000 ms" },
    });
  });
  test("a paused or ended rollout does nothing", () => {
    expect(decide({ ...start, state: "paused" }, 99_000, pass)).toMatchObject({ kind: "wait" });
    expect(decide({ ...start, state: "aborted" }, 99_000, pass)).toMatchObject({ kind: "wait" });
  });
});

describe("the share each region should have", () => {
  test("regions before the current one are done, the current one at its step, later ones untouched", () => {
    const r = { ...start, region: 1, step: 1 };
    expect([0, 1].map((i) => desiredPercent(r, i))).toEqual([100, 25]);
    expect([0, 1].map((i) => desiredPercent(start, i))).toEqual([5, 0]);
  });
  test("rolled back or aborted: the canary drained everywhere; promoted: the canary everywhere", () => {
    for (const state of ["rolledBack", "aborted"] as const)
      expect([0, 1].map((i) => desiredPercent({ ...start, region: 1, state }, i))).toEqual([0, 0]);
    expect([0, 1].map((i) => desiredPercent({ ...start, state: "promoted" }, i))).toEqual([100, 100]);
  });
  test("every decision that moves shards leaves the record unapplied until the move is done", () => {
    expect(decide(start, 10_000, pass)).toMatchObject({ next: { applied: false } });
    expect(decide(start, 3000, { pass: false, why: "x" })).toMatchObject({ next: { applied: false } });
    expect(command(start, "abort", 1, "ops")).toMatchObject({ next: { applied: false } });
  });
  test("the history keeps the newest entries", () => {
    let r = start;
    for (let i = 0; i < LOG_KEEP + 5; i++) r = withLog(r, { action: "tick", why: String(i) }, new Date(0));
    expect(r.log).toHaveLength(LOG_KEEP);
    expect(r.log.at(-1)!.why).toBe(String(LOG_KEEP + 4));
  });
});

describe("operator commands", () => {
  test("pause, then resume restarts the bake", () => {
    const p = command(start, "pause", 1000, "ops");
    expect(p).toMatchObject({ next: { state: "paused" } });
    const r = command((p as { next: Rollout }).next, "resume", 9000, "ops");
    expect(r).toMatchObject({ next: { state: "running", stepStartedAt: 9000 } });
    expect(command(start, "resume", 1, "ops")).toEqual({ refused: "not paused" });
  });
  test("promote jumps to 100% in the current region; abort ends it; an ended rollout refuses everything", () => {
    expect(command(start, "promote", 5, "ops")).toMatchObject({ next: { step: 3, stepStartedAt: 5 } });
    const ab = (command(start, "abort", 5, "ops") as { next: Rollout }).next;
    expect(ab.state).toBe("aborted");
    expect(command(ab, "resume", 6, "ops")).toEqual({ refused: "the rollout is aborted" });
  });
  test("a stored record is parsed strictly", () =>
    expect(Rollout.safeParse({ ...start, extra: 1 }).success).toBe(false));
});

test("the sites refusing more of the canary's answers than of the stable's fails the gate, once both have enough reports", () => {
  const worse = figures({ reports: 20, rejected: 8 });
  const stable = figures({ reports: 40, rejected: 4 });
  expect(gateVerdict(worse, stable, t)).toEqual({
    pass: false,
    why: "answers refused by the sites 40.0% of 20 reported vs stable 10.0% of 40",
  });
  // Within the tolerance, or too few reports to say: the other checks decide.
  expect(gateVerdict(figures({ reports: 20, rejected: 3 }), stable, t).pass).toBe(true);
  expect(gateVerdict(figures({ reports: 5, rejected: 5 }), stable, t).pass).toBe(true);
  // The extra money at list prices is in the verdict.
  expect(gateVerdict(figures({ extraPaid: 2, extraPaidMicros: 2900 }), figures(), t)).toMatchObject({
    pass: false,
    why: expect.stringContaining("extra paid submissions 2 ($0.00290)"),
  });
});

describe("pause steps", () => {
  const paused = RolloutPlan.parse({ ...plan, steps: [5, "pause", 25, 50, 100] });
  const at5: Rollout = { ...start, plan: paused };
  const waiting = (decide(at5, 10_000, pass) as { next: Rollout }).next;

  test("a plan takes pause markers between percentages: not first, not last, not twice in a row", () => {
    expect(RolloutPlan.safeParse({ ...plan, steps: [5, "pause", 25, "pause", 100] }).success).toBe(true);
    const problem = (steps: unknown[]) => RolloutPlan.safeParse({ ...plan, steps }).error?.issues[0]?.message;
    expect(problem(["pause", 5, 100])).toBe("a pause step comes after a percentage, not first");
    expect(problem([5, 100, "pause"])).toBe("increasing percentages ending at 100");
    expect(problem([5, "pause", "pause", 100])).toBe("two pause steps in a row");
    expect(problem([50, "pause", 25, 100])).toBe("increasing percentages ending at 100");
    expect(problem([5, "wait", 100])).toBeDefined();
  });
  test("a record with numeric steps and no onInconclusive (written before either existed) still parses", () => {
    const { onInconclusive: _, ...old } = plan;
    const r = Rollout.parse(JSON.parse(JSON.stringify({ ...start, plan: old })));
    expect(r.plan.onInconclusive).toBe("pause");
    expect(r.awaiting).toBeUndefined();
  });
  test("after the step before it passes, the rollout waits for a person at the same percentage", () => {
    expect(decide(at5, 10_000, pass)).toMatchObject({
      kind: "await",
      region: "fsn1",
      percent: 5,
      next: {
        state: "paused",
        awaiting: "promotion",
        step: 1,
        applied: true,
        stepStartedAt: 10_000,
        reason: "waiting for promotion after 5% in fsn1",
      },
    });
    expect([0, 1].map((i) => desiredPercent(waiting, i))).toEqual([5, 0]);
    expect(percentAt(paused.steps, 1)).toBe(5);
    expect(percentAt(paused.steps, 2)).toBe(25);
  });
  test("it never times out into a rollback, however long it waits", () =>
    expect(decide(waiting, 10_000_000, { pass: "wait", why: "x", traffic: { tasks: 0, need: 20 } })).toMatchObject({
      kind: "wait",
    }));
  test("promote goes on to the next step; promote --full to 100% in the region; resume and pause are refused", () => {
    expect(command(waiting, "promote", 20_000, "ops")).toMatchObject({
      next: {
        state: "running",
        step: 2,
        stepStartedAt: 20_000,
        applied: false,
        reason: "promoted by ops past the pause after 5% in fsn1",
      },
    });
    const next = (command(waiting, "promote", 20_000, "ops") as { next: Rollout }).next;
    expect(next.awaiting).toBeUndefined();
    expect(desiredPercent(next, 0)).toBe(25);
    expect(command(waiting, "promote", 20_000, "ops", { full: true })).toMatchObject({
      next: { state: "running", step: 4, reason: "promoted by ops" },
    });
    expect(command(waiting, "resume", 1, "ops")).toEqual({
      refused: "it waits at a pause step: promote goes on to the next step, abort ends it",
    });
    expect(command(waiting, "pause", 1, "ops")).toEqual({ refused: "already paused (waiting for promotion)" });
    expect(command(waiting, "abort", 1, "ops")).toMatchObject({ next: { state: "aborted" } });
    expect((command(waiting, "abort", 1, "ops") as { next: Rollout }).next.awaiting).toBeUndefined();
  });
  test("promote where no pause step waits keeps its meaning: 100% in the current region", () =>
    expect(command(at5, "promote", 5, "ops")).toMatchObject({ next: { step: 4, reason: "promoted by ops" } }));
  test("each region has its pause: the next region starts at its first step", () => {
    const last = { ...at5, step: 4 };
    expect(decide(last, 20_000, pass)).toMatchObject({ kind: "shift", region: "hel1", percent: 5 });
    expect(decide({ ...at5, region: 1 }, 10_000, pass)).toMatchObject({ kind: "await", region: "hel1" });
  });
  test("the start entry names the pause", () =>
    expect(newRollout(paused, new Date(0), "ops").log[0]!.why).toContain("steps 5/pause/25/50/100%"));
});

describe("inconclusive at the deadline", () => {
  const low = gateVerdict(figures({ tasks: 3 }), figures(), t);
  test("too little traffic pauses for a person's decision (the default), saying how little", () => {
    expect(low).toMatchObject({ pass: "wait", traffic: { tasks: 3, need: 20 } });
    expect(decide(start, 61_000, low)).toMatchObject({
      kind: "inconclusive",
      region: "fsn1",
      percent: 5,
      next: {
        state: "paused",
        awaiting: "decision",
        applied: true,
        reason: "inconclusive: too little traffic (3 tasks, need 20) in fsn1 at 5%",
      },
    });
  });
  test("before the deadline it waits", () => expect(decide(start, 59_000, low)).toMatchObject({ kind: "wait" }));
  test("onInconclusive rollback rolls back as before", () =>
    expect(decide({ ...start, plan: { ...plan, onInconclusive: "rollback" } }, 61_000, low)).toMatchObject({
      kind: "rollback",
      next: { reason: "no passing gate in fsn1 at 5% within 60000 ms" },
    }));
  test("a failing gate still rolls back, whatever onInconclusive says", () =>
    expect(decide(start, 61_000, { pass: false, why: "p95" })).toMatchObject({ kind: "rollback" }));
  test("resume judges the step again with a new deadline; promote keeps its meaning", () => {
    const held = (decide(start, 61_000, low) as { next: Rollout }).next;
    expect(command(held, "resume", 70_000, "ops")).toMatchObject({ next: { state: "running", stepStartedAt: 70_000 } });
    expect((command(held, "resume", 70_000, "ops") as { next: Rollout }).next.awaiting).toBeUndefined();
    expect(command(held, "promote", 70_000, "ops")).toMatchObject({ next: { state: "running", step: 3 } });
    expect(decide(held, 10_000_000, low)).toMatchObject({ kind: "wait" });
  });
});
