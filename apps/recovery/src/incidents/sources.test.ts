import { expect, test } from "bun:test";
import { drillObservation, restoreObservation } from "./drill.ts";
import { failoverObservation } from "./failover.ts";

const T = Date.parse("2026-12-06T10:00:00.000Z");

test("a failover starts TTL + margin before the takeover and ends when the resumable tasks are adopted", () => {
  const o = failoverObservation({
    local: "hel1",
    remote: "fsn1",
    epoch: 3,
    takenOverAt: T,
    adoptedAt: T + 800,
    stillMs: 5000,
    adopted: { phase: "resumable", count: 12, withProviderId: 12 },
  });
  expect(o).toMatchObject({
    key: "failover:fsn1:3",
    region: "fsn1",
    startedAt: new Date(T - 5000).toISOString(),
    detectedAt: new Date(T).toISOString(),
    recoveredAt: new Date(T + 800).toISOString(),
    endedAt: new Date(T + 800).toISOString(),
    detail: { survivor: "hel1", epoch: 3, adopted_resumable: 12 },
  });
  // The later phase ("all") adds its tasks without moving the recovery.
  const all = failoverObservation({
    local: "hel1",
    remote: "fsn1",
    epoch: 3,
    takenOverAt: T + 25_000,
    adoptedAt: T + 25_100,
    stillMs: 5000,
    adopted: { phase: "all", count: 2, withProviderId: 0 },
  });
  expect(all.endedAt).toBeUndefined();
  expect(all.detail).toMatchObject({ adopted_all: 2 });
});

test("a drill's incident carries its receipt: RPO, RTO, tasks, extra paid; it ends when the rate is back and the tasks of before the fault are done", () => {
  const o = drillObservation({
    scenario: "worker-crash",
    runId: "worker-crash-1a2b3c4d",
    region: "fsn1",
    faultAt: T,
    remedyMs: 200,
    rtoMs: 6500,
    catchUpMs: 9000,
    rpo: 0,
    acknowledged: 120,
    passed: true,
    steps: [{ atMs: 200, what: "remedy applied" }],
    money: { extraCharges: 1, extraMicros: 1450, totalMicros: 174_000 },
  });
  expect(o).toMatchObject({
    key: "drill:worker-crash-1a2b3c4d",
    startedAt: new Date(T).toISOString(),
    recoveredAt: new Date(T + 200).toISOString(),
    endedAt: new Date(T + 9000).toISOString(),
    figures: { tasksAffected: 120, rpo: 0, rtoMs: 6500, extraPaid: 1, extraMicros: 1450 },
  });
  expect(o.timeline.map((e) => e.what)).toEqual([
    "fault injected: worker-crash",
    "remedy applied",
    "completions back at the normal rate",
    "every task acknowledged before the fault finished",
  ]);
});

test("a restore is one closed incident from its start to the end of the replay", () => {
  const o = restoreObservation({
    region: "fsn1",
    snapshot: "snap-1",
    into: "postgres://db/x",
    startedAt: T,
    restoreMs: 900,
    totalMs: 1500,
    replayedEvents: 40,
    tasks: { completed: 30, queued: 2 },
    actor: "alice@host",
  });
  expect(o).toMatchObject({ key: `restore:snap-1:${T}`, endedAt: new Date(T + 1500).toISOString() });
  expect(o.figures).toEqual({ tasksAffected: 32, rtoMs: 1500 });
});
