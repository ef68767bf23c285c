// A lane's pause record: who paused a lane of a region, when, why and until when. It lives in the
// region's own bucket (`region_<region>`, key `lane.<lane>`), which every solver may read: the
// truth of "who paused it and when". The lane consumers' pause (`pause_until`) is how it is
// enforced (apps/recovery/src/lanes); a consumer created while the lane is paused is created
// paused (shards/assignment.ts, nats/topology.ts take the pause from here).
import { z } from "zod";
import { Priority } from "../schemas/task-types.ts";

/** The KV key of a lane's record in the region bucket. */
export const laneKey = (lane: Priority) => `lane.${lane}`;

/**
 * The consumers' `pause_until` of a lane paused "until resumed": a fixed far-future instant the
 * server accepts and keeps (nats-server 2.15 reads it back unchanged; its pause_remaining
 * saturates at the largest duration).
 */
export const PAUSED_UNTIL_RESUMED = "9999-01-01T00:00:00Z";

export const LaneRecord = z
  .object({
    lane: Priority,
    /** false: resumed (the record says by whom and when). */
    paused: z.boolean(),
    /** Who paused or resumed it (`console:<name>`, `cli:<login>@<host>`). */
    by: z.string().min(1).max(128),
    /** When (ISO time). */
    at: z.iso.datetime(),
    reason: z.string().min(1).max(200).optional(),
    /** A pause with an end: the consumers resume by themselves then. */
    until: z.iso.datetime().optional(),
  })
  .strict();
export type LaneRecord = z.infer<typeof LaneRecord>;

/** Whether the record holds the lane paused at `now` (a pause whose `until` passed has ended). */
export function isPausedAt(r: LaneRecord | null | undefined, now: number): boolean {
  return !!r?.paused && (r.until === undefined || Date.parse(r.until) > now);
}

/** The `pause_until` its lane consumers must carry at `now`, or undefined when the lane runs. */
export function pauseUntilOf(r: LaneRecord | null | undefined, now: number): string | undefined {
  if (!r || !isPausedAt(r, now)) return undefined;
  return r.until ?? PAUSED_UNTIL_RESUMED;
}

/** A record's bytes parsed: the record, or the reason it is refused (naming the field). */
export function parseLaneRecord(
  lane: Priority,
  text: string,
): { ok: true; record: LaneRecord } | { ok: false; error: string } {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return { ok: false, error: `lane.${lane}: not JSON` };
  }
  const r = LaneRecord.safeParse(doc);
  if (!r.success)
    return {
      ok: false,
      error: `lane.${lane}: ${r.error.issues.map((i) => `${i.path.join(".") || "record"}: ${i.message}`).join("; ")}`,
    };
  if (r.data.lane !== lane) return { ok: false, error: `lane.${lane}: the record names lane ${r.data.lane}` };
  return { ok: true, record: r.data };
}
