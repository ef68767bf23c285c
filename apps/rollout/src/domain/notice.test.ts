import { expect, test } from "bun:test";
import { noticeOf } from "./notice.ts";
import { type Rollout, RolloutPlan } from "./plan.ts";

const plan = RolloutPlan.parse({
  version: "v2",
  stable: "v1",
  regions: ["fsn1", "hel1"],
  steps: [5, "pause", 100],
  gate: {},
});
const r: Rollout = { id: "v2-1", plan, state: "running", region: 0, step: 0, stepStartedAt: 7, applied: true, log: [] };

test("a running rollout or one paused by a person calls for no notification", () => {
  expect(noticeOf(r)).toBeUndefined();
  expect(noticeOf({ ...r, state: "paused", reason: "paused by ops" })).toBeUndefined();
});

test("each state a person must hear of has its kind, and each event its own key", () => {
  const waiting = noticeOf({
    ...r,
    state: "paused",
    awaiting: "promotion",
    step: 1,
    reason: "waiting for promotion after 5% in fsn1",
  });
  expect(waiting).toMatchObject({ kind: "awaiting_promotion", key: "rollout:v2-1:awaiting_promotion:fsn1.1.7" });
  expect(waiting!.title).toBe("Rollout v2-1 (v2 replacing v1) waits for promotion in fsn1 at 5%");
  expect(waiting!.text).toContain("waiting for promotion after 5% in fsn1");
  const figures = { canary: { tasks: 3, failed: 0, p95Ms: 800 }, stable: { tasks: 40, failed: 1, p95Ms: 700 } };
  const held = noticeOf({
    ...r,
    state: "paused",
    awaiting: "decision",
    reason: "inconclusive: too little traffic (3 tasks, need 20) in fsn1 at 5%",
    log: [{ at: "x", action: "inconclusive", why: "x", figures }],
  });
  expect(held).toMatchObject({ kind: "inconclusive", key: "rollout:v2-1:inconclusive:fsn1.0.7" });
  expect(held!.text).toContain("last gate: canary 3 tasks, 0 failed, p95 800 ms; stable 40, 1, 700 ms");
  // The same step inconclusive again after a resume (a new stepStartedAt) is another event.
  expect(noticeOf({ ...r, state: "paused", awaiting: "decision", stepStartedAt: 9 })!.key).not.toBe(held!.key);
  expect(noticeOf({ ...r, state: "rolledBack" })!.kind).toBe("rollback");
  expect(noticeOf({ ...r, state: "aborted" })!.kind).toBe("aborted");
  expect(noticeOf({ ...r, state: "promoted", region: 1, step: 2 })).toMatchObject({
    kind: "promoted",
    title: "Rollout v2-1 (v2 replacing v1) promoted in fsn1, hel1",
  });
});
