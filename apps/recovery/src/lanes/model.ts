// Pausing a lane, the pure part: what an operator asks (checked with zod, each field named), the
// record it becomes, how a lane's state reads for people, and which consumers disagree with it.
import { isPausedAt, type LaneRecord } from "@pipeline/shared/lanes";
import { Priority } from "@pipeline/shared/schemas";
import { z } from "zod";

/** The longest `--for`/`for`: a week (longer: pause until resumed). */
export const MAX_PAUSE_MS = 7 * 86_400_000;
const DURATION = /^(\d{1,6})([smhd])$/;
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `30m`, `2h`, `90s`, `1d` in milliseconds; undefined when it is not one. */
export function durationMs(s: string): number | undefined {
  const m = DURATION.exec(s.trim());
  return m ? Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS] : undefined;
}

/** A pause or resume as asked (HTTP body or CLI options): the lane, why, and for how long. */
export const LaneAction = z
  .object({
    lane: Priority,
    reason: z.string().trim().min(1).max(200).optional(),
    /** How long (`30m`, `2h`, `1d`; at most 7d); absent: until resumed. Only for a pause. */
    for: z
      .string()
      .optional()
      .refine((s) => s === undefined || (durationMs(s) ?? 0) > 0, {
        message: "a duration such as 90s, 30m, 2h or 1d",
      })
      .refine((s) => s === undefined || (durationMs(s) ?? 0) <= MAX_PAUSE_MS, {
        message: "at most 7d (leave it out to pause until resumed)",
      }),
  })
  .strict();
export type LaneAction = z.infer<typeof LaneAction>;

/** The input checked: the action, or a message naming each field at fault. */
export function parseLaneAction(
  input: unknown,
): { ok: true; action: LaneAction } | { ok: false; error: string; fields: string[] } {
  const r = LaneAction.safeParse(input);
  if (r.success) return { ok: true, action: r.data };
  const fields = [...new Set(r.error.issues.map((i) => String(i.path[0] ?? "body")))];
  return {
    ok: false,
    error: r.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; "),
    fields,
  };
}

/** The record of a pause (`paused`) or a resume, by `actor` at `now`. */
export function recordOf(a: LaneAction, paused: boolean, actor: string, now: Date): LaneRecord {
  const forMs = paused && a.for ? durationMs(a.for) : undefined;
  return {
    lane: a.lane,
    paused,
    by: actor.slice(0, 128),
    at: now.toISOString(),
    ...(a.reason ? { reason: a.reason } : {}),
    ...(forMs ? { until: new Date(now.getTime() + forMs).toISOString() } : {}),
  };
}

/** One lane consumer as the server has it. */
export interface LaneConsumer {
  name: string;
  version: string;
  paused: boolean;
  pauseUntil: string | null;
}

/** A lane of the region: its record, its consumers, and whether they agree. */
export interface LaneState {
  lane: Priority;
  state: "paused" | "running";
  record: LaneRecord | null;
  /** The record could not be read or parsed (the consumers are then left alone). */
  error?: string;
  consumers: LaneConsumer[];
  /** Consumers whose pause disagrees with the record (the service's enforcement mends them). */
  disagree: string[];
}

/** The lane's state from its record and consumers at `now`. */
export function laneState(
  lane: Priority,
  read: { record: LaneRecord | null } | { error: string },
  consumers: LaneConsumer[],
  now: number,
): LaneState {
  if ("error" in read) return { lane, state: "running", record: null, error: read.error, consumers, disagree: [] };
  const paused = isPausedAt(read.record, now);
  const disagree = read.record
    ? consumers.filter((c) => c.paused !== paused).map((c) => c.name)
    : // No record: nobody paused the lane through us; a paused consumer is someone else's doing.
      [];
  return { lane, state: paused ? "paused" : "running", record: read.record, consumers, disagree };
}

/** `console:ops` as `ops via console`, `cli:alice@host` as `alice@host via cli`. */
export function whoOf(by: string): string {
  const m = /^(console|cli):(.+)$/.exec(by);
  return m ? `${m[2]} via ${m[1]}` : by;
}

const hhmm = (iso: string) => iso.replace("T", " ").slice(0, 19);

/** One line for people: `normal  PAUSED by ops via console since 2026-12-06 14:00:00 UTC until ...: reason`. */
export function describeLane(s: LaneState): string {
  const r = s.record;
  if (s.error) return `${s.lane.padEnd(7)}unknown: the lane record is unreadable (${s.error})`;
  const consumers = `${s.consumers.length} consumer${s.consumers.length === 1 ? "" : "s"}`;
  const mend = s.disagree.length ? `; not yet enforced on ${s.disagree.join(", ")}` : "";
  if (s.state === "paused" && r)
    return `${s.lane.padEnd(7)}PAUSED by ${whoOf(r.by)} since ${hhmm(r.at)} UTC${r.until ? `, until ${hhmm(r.until)} UTC` : ", until resumed"}${r.reason ? `: ${r.reason}` : ""} (${consumers}${mend})`;
  const last = r
    ? r.paused
      ? ` (a pause by ${whoOf(r.by)} ended at ${hhmm(r.until ?? r.at)} UTC)`
      : ` (resumed by ${whoOf(r.by)} at ${hhmm(r.at)} UTC)`
    : "";
  return `${s.lane.padEnd(7)}running${last} (${consumers}${mend})`;
}
