// Drills and restores as incidents (pure; sources.test.ts): both are recorded by what runs them,
// opened and closed at once with what they measured. A drill: start = the fault, detection = the
// fault (a drill knows its own fault), recovery = the remedy applied, end = the last of: completions
// back at the normal rate (start + RTO), the remedy, every task acknowledged before the fault
// finished (the catch-up); RPO, RTO, tasks (the drill's
// acknowledged tasks) and extra paid submissions from its receipt. A restore: start to end of
// `recovery restore` (restore and replay), tasks = the rows restored.
import type { Observation } from "./model.ts";

/** What the drill runner measured (a subset of its DrillReport). */
export interface DrillReceipt {
  scenario: string;
  runId: string;
  region: string;
  faultAt: number;
  remedyMs: number;
  rtoMs: number | null;
  /** Fault -> every task acknowledged before it finished (null: some never did). */
  catchUpMs: number | null;
  rpo: number;
  acknowledged: number;
  passed: boolean;
  steps: { atMs: number; what: string }[];
  money?: { extraCharges: number; extraMicros: number; totalMicros: number };
}

const iso = (ms: number) => new Date(ms).toISOString();

export function drillObservation(d: DrillReceipt): Observation {
  // The end: the rate back, the remedy applied and every task acknowledged before the fault done.
  const endMs = d.faultAt + Math.max(d.rtoMs ?? d.remedyMs, d.remedyMs, d.catchUpMs ?? 0);
  return {
    key: `drill:${d.runId}`,
    kind: "drill",
    region: d.region,
    summary: `drill ${d.scenario} (${d.runId}) ${d.passed ? "passed" : "FAILED"}: RPO ${d.rpo}, RTO ${d.rtoMs === null ? "never" : `${(d.rtoMs / 1000).toFixed(1)} s`}`,
    startedAt: iso(d.faultAt),
    detectedAt: iso(d.faultAt),
    recoveredAt: iso(d.faultAt + d.remedyMs),
    endedAt: iso(endMs),
    figures: {
      tasksAffected: d.acknowledged,
      rpo: d.rpo,
      rtoMs: d.rtoMs,
      ...(d.money ? { extraPaid: d.money.extraCharges, extraMicros: d.money.extraMicros } : {}),
    },
    detail: { scenario: d.scenario, runId: d.runId, passed: d.passed, ...(d.money ? { money: d.money } : {}) },
    timeline: [
      { at: iso(d.faultAt), source: "drill", what: `fault injected: ${d.scenario}` },
      ...d.steps.map((s) => ({ at: iso(d.faultAt + s.atMs), source: "drill", what: s.what })),
      ...(d.rtoMs !== null
        ? [{ at: iso(d.faultAt + d.rtoMs), source: "drill", what: "completions back at the normal rate" }]
        : []),
      ...(d.catchUpMs !== null
        ? [
            {
              at: iso(d.faultAt + d.catchUpMs),
              source: "drill",
              what: "every task acknowledged before the fault finished",
            },
          ]
        : []),
    ],
  };
}

export interface RestoreSighting {
  region: string;
  snapshot: string;
  into: string;
  startedAt: number;
  restoreMs: number;
  totalMs: number;
  replayedEvents: number | null;
  tasks: Record<string, number>;
  actor: string;
}

export function restoreObservation(r: RestoreSighting): Observation {
  const end = iso(r.startedAt + r.totalMs);
  const rows = Object.values(r.tasks).reduce((a, b) => a + b, 0);
  return {
    key: `restore:${r.snapshot}:${r.startedAt}`,
    kind: "restore",
    region: r.region,
    summary: `snapshot ${r.snapshot} restored into ${r.into} by ${r.actor}${r.replayedEvents === null ? " (no replay)" : `, ${r.replayedEvents} events replayed`}`,
    startedAt: iso(r.startedAt),
    detectedAt: iso(r.startedAt),
    recoveredAt: end,
    endedAt: end,
    figures: { tasksAffected: rows, rtoMs: r.totalMs },
    detail: { snapshot: r.snapshot, into: r.into, tasks: r.tasks, actor: r.actor },
    timeline: [
      { at: iso(r.startedAt), source: "restore", what: `restore of ${r.snapshot} into ${r.into} began (${r.actor})` },
      { at: iso(r.startedAt + r.restoreMs), source: "restore", what: `pg_restore done in ${r.restoreMs} ms` },
      {
        at: end,
        source: "restore",
        what: `${r.replayedEvents === null ? "no replay" : `${r.replayedEvents} events replayed`}; ${rows} task rows`,
      },
    ],
  };
}
