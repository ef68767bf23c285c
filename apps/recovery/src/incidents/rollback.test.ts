import { expect, test } from "bun:test";
import { parseRolloutRecord, rollbackObservation } from "./rollback.ts";

const base = {
  id: "v2-20261206100000",
  state: "running",
  plan: { version: "v2", stable: "v1", regions: ["fsn1", "hel1"], steps: [5, 100] },
  region: 0,
  step: 0,
  log: [
    { at: "2026-12-06T10:00:00.000Z", action: "start", why: "v2 replaces v1" },
    { at: "2026-12-06T10:00:01.000Z", action: "applied", why: "fsn1: 1 shard(s) to v2" },
  ],
  somethingNew: { the: "rollout's own schema may grow" },
};
const decision = {
  at: "2026-12-06T10:01:05.000Z",
  action: "rollback",
  region: "fsn1",
  why: "gate failed in fsn1 at 5%: extra paid submissions 3 > 0",
  figures: { canary: { tasks: 40, extraPaid: 3, extraPaidMicros: 4350, failed: 0 }, stable: { tasks: 400 } },
};

const parsed = (v: unknown) => {
  const p = parseRolloutRecord(v);
  if (!p.ok) throw new Error(p.error);
  return p.record;
};

test("a running rollout is no incident", () => {
  expect(rollbackObservation(parsed(base), "fsn1")).toBeUndefined();
});

test("rolled back: opened at the decision, from the failing step's move, with the canary's figures; closed once the shards are back", () => {
  const rolledBack = { ...base, state: "rolledBack", reason: decision.why, log: [...base.log, decision] };
  const open = rollbackObservation(parsed(rolledBack), "x")!;
  expect(open).toMatchObject({
    key: "rollback:v2-20261206100000",
    kind: "rollback",
    region: "fsn1",
    startedAt: "2026-12-06T10:00:01.000Z",
    detectedAt: "2026-12-06T10:01:05.000Z",
    figures: { tasksAffected: 40, extraPaid: 3, extraMicros: 4350 },
  });
  expect(open.endedAt).toBeUndefined();
  const back = {
    ...rolledBack,
    log: [...rolledBack.log, { at: "2026-12-06T10:01:07.500Z", action: "applied", why: "fsn1: 1 shard(s) to v1" }],
  };
  const closed = rollbackObservation(parsed(back), "x")!;
  expect(closed.recoveredAt).toBe("2026-12-06T10:01:07.500Z");
  expect(closed.endedAt).toBe("2026-12-06T10:01:07.500Z");
  expect(closed.timeline.map((t) => t.what)).toEqual([
    "applied: fsn1: 1 shard(s) to v2",
    `rollback fsn1: ${decision.why}`,
    "applied: fsn1: 1 shard(s) to v1",
  ]);
});

test("a record that does not parse names the field", () => {
  const p = parseRolloutRecord({ id: "", state: "rolledBack", log: [{ at: "yesterday", action: "x" }] });
  expect(p.ok).toBe(false);
  if (!p.ok) {
    expect(p.error).toContain("id:");
    expect(p.error).toContain("log.0.at");
  }
});
