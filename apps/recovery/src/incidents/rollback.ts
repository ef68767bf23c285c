// A rollout rolled back, as an incident (pure; rollback.test.ts). The rollout service's record
// (KV `rollout_control`, key `current`) is read with a schema of only the fields used here, lenient
// about the rest, so a change of the rollout's own schema elsewhere does not blind the detector.
// Start: the failing step's shards moved to the canary (the `applied` line before the rollback);
// detection: the rollback decision; recovery and end: the next `applied` line (the shards back on
// the stable version). Tasks affected, extra paid and their money: the canary's figures of the
// window that failed (the decision's `figures.canary`).
import { z } from "zod";
import type { Observation, TimelineEntry } from "./model.ts";

const Figures = z
  .object({
    tasks: z.number().int().nonnegative().optional(),
    extraPaid: z.number().int().nonnegative().optional(),
    extraPaidMicros: z.number().int().nonnegative().optional(),
  })
  .passthrough();

const LogLine = z
  .object({
    at: z.string().datetime({ offset: true }),
    action: z.string(),
    region: z.string().optional(),
    percent: z.number().optional(),
    why: z.string().default(""),
    figures: z.object({ canary: Figures.optional() }).passthrough().optional(),
  })
  .passthrough();

/** The fields of a rollout record the detector reads; anything else is ignored. */
export const RolloutRecord = z
  .object({
    id: z.string().min(1).max(200),
    state: z.string(),
    reason: z.string().optional(),
    log: z.array(LogLine).default([]),
    plan: z
      .object({ version: z.string(), stable: z.string(), regions: z.array(z.string()) })
      .passthrough()
      .optional(),
  })
  .passthrough();
export type RolloutRecord = z.infer<typeof RolloutRecord>;

/** The record parsed, or why not (the field at fault). */
export function parseRolloutRecord(value: unknown): { ok: true; record: RolloutRecord } | { ok: false; error: string } {
  const r = RolloutRecord.safeParse(value);
  if (r.success) return { ok: true, record: r.data };
  return {
    ok: false,
    error: r.error.issues.map((i) => `${i.path.join(".") || "record"}: ${i.message}`).join("; "),
  };
}

const line = (l: RolloutRecord["log"][number]): TimelineEntry => ({
  at: new Date(l.at).toISOString(),
  source: "rollout_control",
  what: `${l.action}${l.region ? ` ${l.region}` : ""}${l.percent !== undefined ? ` ${l.percent}%` : ""}: ${l.why}`,
});

/** The incident of a rolled back rollout, or undefined while it is not rolled back. */
export function rollbackObservation(r: RolloutRecord, fallbackRegion: string): Observation | undefined {
  if (r.state !== "rolledBack") return undefined;
  const log = r.log;
  const at = log.findLastIndex((l) => l.action === "rollback");
  const decision = at >= 0 ? log[at] : undefined;
  // The failing step began when its shards moved: the last `applied` (else `start`) before the decision.
  const before = log.slice(0, at >= 0 ? at : log.length);
  const stepStart = before.findLast((l) => l.action === "applied") ?? before.findLast((l) => l.action === "start");
  const back = at >= 0 ? log.slice(at + 1).find((l) => l.action === "applied") : undefined;
  const detectedAt = decision ? new Date(decision.at).toISOString() : undefined;
  const startedAt = stepStart ? new Date(stepStart.at).toISOString() : (detectedAt ?? new Date(0).toISOString());
  const canary = decision?.figures?.canary;
  const recoveredAt = back ? new Date(back.at).toISOString() : undefined;
  const version = r.plan ? ` ${r.plan.version} (stable ${r.plan.stable})` : "";
  return {
    key: `rollback:${r.id}`,
    kind: "rollback",
    region: decision?.region ?? r.plan?.regions[0] ?? fallbackRegion,
    summary: `rollout ${r.id}${version} rolled back: ${r.reason ?? decision?.why ?? "no reason recorded"}`,
    startedAt,
    ...(detectedAt ? { detectedAt } : {}),
    ...(recoveredAt ? { recoveredAt, endedAt: recoveredAt } : {}),
    figures: {
      ...(canary?.tasks !== undefined ? { tasksAffected: canary.tasks } : {}),
      ...(canary?.extraPaid !== undefined ? { extraPaid: canary.extraPaid } : {}),
      ...(canary?.extraPaidMicros !== undefined ? { extraMicros: canary.extraPaidMicros } : {}),
    },
    detail: { rolloutId: r.id, reason: r.reason ?? null, ...(canary ? { canary } : {}) },
    timeline: log.filter((l) => Date.parse(l.at) >= Date.parse(startedAt)).map(line),
  };
}
