// An incident as data, pure (model.test.ts): what a source says happened (an observation, keyed by
// its source event so it is recorded once), and the record read back with its durations. Times are
// ISO strings; a figure is null where it is not known (docs/incidents.md defines each one).

export type IncidentKind = "failover" | "rollback" | "restore" | "breaker" | "drill";
export const INCIDENT_KINDS: readonly IncidentKind[] = ["failover", "rollback", "restore", "breaker", "drill"];

/** One line of a timeline: when, where it was read (EVENTS, audit_log, rollout_control...), what happened. */
export interface TimelineEntry {
  at: string;
  source: string;
  what: string;
}

/** The figures of an incident, each null while unknown. */
export interface IncidentFigures {
  tasksAffected: number | null;
  rpo: number | null;
  rtoMs: number | null;
  extraPaid: number | null;
  extraMicros: number | null;
}

/**
 * What a source saw: the incident's unique key and what is known of it now. Recorded again as the
 * source changes: times already set are kept (the first sighting wins), a figure is replaced by a
 * known one, the timeline gains the new lines, `detail` gains the new fields.
 */
export interface Observation {
  key: string;
  kind: IncidentKind;
  region: string;
  summary: string;
  startedAt: string;
  detectedAt?: string;
  recoveredAt?: string;
  /** Set when the recovery is seen: the incident is closed. */
  endedAt?: string;
  figures?: Partial<IncidentFigures>;
  detail?: Record<string, unknown>;
  timeline: TimelineEntry[];
}

/** A stored incident as the console and the CLI show it. */
export interface Incident extends IncidentFigures {
  id: number;
  key: string;
  kind: IncidentKind;
  region: string;
  summary: string;
  startedAt: string;
  detectedAt: string | null;
  recoveredAt: string | null;
  endedAt: string | null;
  open: boolean;
  /** End - start (null while open). */
  mttrMs: number | null;
  /** Recovery - detection: how long the remedy took once the incident was known. */
  detectToRecoverMs: number | null;
  /** Start - detection: how long it went unnoticed. */
  detectMs: number | null;
  detail: Record<string, unknown>;
  timeline: TimelineEntry[];
  openedAt: string;
  updatedAt: string;
}

const span = (from: string | null, to: string | null): number | null =>
  from && to ? Math.max(0, Date.parse(to) - Date.parse(from)) : null;

/** The durations of an incident from its times (docs/incidents.md, "Figures"). */
export function durations(i: {
  startedAt: string;
  detectedAt: string | null;
  recoveredAt: string | null;
  endedAt: string | null;
}): Pick<Incident, "mttrMs" | "detectToRecoverMs" | "detectMs"> {
  return {
    mttrMs: span(i.startedAt, i.endedAt),
    detectToRecoverMs: span(i.detectedAt, i.recoveredAt),
    detectMs: span(i.startedAt, i.detectedAt),
  };
}

/** The timeline in time order, each line once (two sightings of the same source line merge). */
export function mergeTimeline(a: readonly TimelineEntry[], b: readonly TimelineEntry[]): TimelineEntry[] {
  const seen = new Map<string, TimelineEntry>();
  for (const e of [...a, ...b]) seen.set(`${e.at}\u0000${e.source}\u0000${e.what}`, e);
  return [...seen.values()].sort((x, y) => Date.parse(x.at) - Date.parse(y.at) || x.what.localeCompare(y.what));
}

/** `1.2 s`, `3 min 05 s`, `2 h 04 min`; `–` for null. */
export function fmtDuration(ms: number | null): string {
  if (ms === null) return "–";
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
}

/** `$0.00290` from micro-dollars; `–` for null. */
export function fmtMicros(micros: number | null): string {
  if (micros === null) return "–";
  return `${micros < 0 ? "-" : ""}$${(Math.abs(micros) / 1_000_000).toFixed(5)}`;
}

/** `2026-12-06 13:48:26` (UTC) from an ISO time. */
export const fmtTime = (iso: string | null) => (iso ? iso.replace("T", " ").slice(0, 19) : "–");
