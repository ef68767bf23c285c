import { describe, expect, test } from "bun:test";
import { moveFor, placement } from "./placement.ts";
import { type Rollout, RolloutPlan } from "./plan.ts";

const plan = RolloutPlan.parse({
  version: "v2",
  stable: "v1",
  regions: ["fsn1", "hel1"],
  steps: [25, 100],
  bakeMs: 10_000,
  progressDeadlineMs: 60_000,
  gate: {},
});
const running: Rollout = {
  id: "r1",
  plan,
  state: "running",
  region: 1,
  step: 0,
  stepStartedAt: 0,
  applied: false,
  log: [],
};
const runs = (regions: string[]) => (name: string) => (regions.includes(name) ? 1 : 0);

describe("before a decision's shards move", () => {
  test("they move when every region that is to get canary shards runs the canary", () => {
    expect(placement(running, runs(["fsn1", "hel1"]), 1000)).toEqual({ kind: "move" });
  });
  test("a region without a canary process holds the move, naming the first such region", () => {
    expect(placement(running, runs(["fsn1"]), 1000)).toEqual({
      kind: "wait",
      why: "no v2 process in hel1 (heartbeats)",
    });
    expect(placement(running, runs([]), 1000)).toEqual({ kind: "wait", why: "no v2 process in fsn1 (heartbeats)" });
  });
  test("past the progress deadline a running rollout is rolled back instead, unapplied, with its log line", () => {
    const p = placement(running, runs(["fsn1"]), 61_000);
    expect(p).toMatchObject({
      kind: "rollback",
      region: "hel1",
      next: { state: "rolledBack", applied: false, reason: "no v2 process in hel1 (heartbeats) within 60000 ms" },
    });
    expect(p.kind === "rollback" && p.next.log).toEqual([
      {
        at: new Date(61_000).toISOString(),
        action: "rollback",
        region: "hel1",
        why: "no v2 process in hel1 (heartbeats)",
      },
    ]);
  });
  test("a paused rollout waits whatever the clock; a rolled back or aborted one always moves (0 % everywhere)", () => {
    expect(placement({ ...running, state: "paused" }, runs([]), 99_000)).toMatchObject({ kind: "wait" });
    for (const state of ["rolledBack", "aborted"] as const)
      expect(placement({ ...running, state }, runs([]), 99_000)).toEqual({ kind: "move" });
  });
});

describe("a region's share as a move", () => {
  test("the canary its percentage of the shards, rounded up; at 0 % every shard back to the stable version", () => {
    expect(moveFor(plan, 25, 16)).toEqual({ to: "v2", count: 4 });
    expect(moveFor(plan, 5, 16)).toEqual({ to: "v2", count: 1 });
    expect(moveFor(plan, 100, 16)).toEqual({ to: "v2", count: 16 });
    expect(moveFor(plan, 0, 16)).toEqual({ to: "v1", count: 16 });
  });
});
