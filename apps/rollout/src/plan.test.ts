import { describe, expect, test } from "bun:test";
import { command, decide, GateThresholds, gateVerdict, Rollout, RolloutPlan, type VersionFigures } from "./plan.ts";

const t = GateThresholds.parse({});
const plan = RolloutPlan.parse({ version: "v2", stable: "v1", regions: ["fsn1", "hel1"], steps: [5, 25, 50, 100], bakeMs: 10_000, progressDeadlineMs: 60_000, gate: {} });
const start: Rollout = { id: "r1", plan, state: "running", region: 0, step: 0, stepStartedAt: 0 };
const figures = (o: Partial<VersionFigures> = {}): VersionFigures => ({ tasks: 100, failed: 1, providerCalls: 200, providerErrors: 2, extraPaid: 0, p95Ms: 1000, lostProcesses: 0, ...o });
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
  test("one extra paid submission fails at once, whatever the volume", () => expect(gateVerdict(figures({ tasks: 3, extraPaid: 1 }), figures(), t)).toMatchObject({ pass: false, why: "extra paid submissions 1 > 0" }));
  test("a lost canary process fails", () => expect(gateVerdict(figures({ lostProcesses: 1 }), figures(), t).pass).toBe(false));
  test("too little canary traffic waits rather than judging", () => expect(gateVerdict(figures({ tasks: 5 }), figures(), t).pass).toBe("wait"));
  test("a failure rate above the stable one by more than the threshold fails, naming both", () => {
    const v = gateVerdict(figures({ failed: 10 }), figures({ failed: 1 }), t);
    expect(v).toEqual({ pass: false, why: "task failure rate 10.0% vs stable 1.0%" });
  });
  test("a provider error rate above the stable one fails (a misconfigured provider URL or key)", () => expect(gateVerdict(figures({ providerErrors: 150 }), figures(), t).pass).toBe(false));
  test("a p95 beyond the ratio fails", () => expect(gateVerdict(figures({ p95Ms: 2000 }), figures({ p95Ms: 1000 }), t).pass).toBe(false));
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
    expect(decide(last, 20_000, pass)).toMatchObject({ kind: "shift", region: "hel1", percent: 5, next: { region: 1, step: 0, stepStartedAt: 20_000 } });
  });
  test("after the last step of the last region: promoted", () => {
    expect(decide({ ...start, region: 1, step: 3 }, 20_000, pass)).toMatchObject({ kind: "done", next: { state: "promoted" } });
  });
  test("a failed gate rolls the region back to the stable version, saying why", () => {
    const a = decide(start, 3000, gateVerdict(figures({ extraPaid: 2 }), figures(), t));
    expect(a).toMatchObject({ kind: "rollback", region: "fsn1", toStable: "v1", next: { state: "rolledBack", reason: "gate failed in fsn1 at 5%: extra paid submissions 2 > 0" } });
  });
  test("no passing gate by the progress deadline rolls back too", () => {
    expect(decide(start, 61_000, { pass: "wait", why: "no traffic" })).toMatchObject({ kind: "rollback", next: { reason: "no passing gate in fsn1 at 5% within 60000 ms" } });
  });
  test("a paused or ended rollout does nothing", () => {
    expect(decide({ ...start, state: "paused" }, 99_000, pass)).toMatchObject({ kind: "wait" });
    expect(decide({ ...start, state: "aborted" }, 99_000, pass)).toMatchObject({ kind: "wait" });
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
  test("a stored record is parsed strictly", () => expect(Rollout.safeParse({ ...start, extra: 1 }).success).toBe(false));
});
