// The `incidents` table (migration 0015): an observation is recorded by its key, once. A second
// sighting of the same key keeps the times already known (first sighting wins), replaces a figure
// by a known one, merges the timeline and the detail; an incident closed stays closed.
import type postgres from "postgres";
import {
  durations,
  INCIDENT_KINDS,
  type Incident,
  type IncidentKind,
  mergeTimeline,
  type Observation,
  type TimelineEntry,
} from "./model.ts";

interface Row {
  id: string | number;
  key: string;
  kind: string;
  region: string;
  summary: string;
  started_at: Date | string;
  detected_at: Date | string | null;
  recovered_at: Date | string | null;
  ended_at: Date | string | null;
  tasks_affected: number | null;
  rpo: number | null;
  rto_ms: string | number | null;
  extra_paid: number | null;
  extra_micros: string | number | null;
  detail: Record<string, unknown>;
  timeline: TimelineEntry[];
  opened_at: Date | string;
  updated_at: Date | string;
}

/**
 * A timestamptz as ISO text: a Date from a plain postgres.js client, or Postgres' own text
 * (`2026-12-06 10:00:00.123+00`) from the drizzle-tuned pool, which leaves timestamps unparsed.
 */
function iso(d: Date | string | null): string | null {
  if (d === null) return null;
  if (d instanceof Date) return d.toISOString();
  const t = d.replace(" ", "T").replace(/([+-]\d\d)$/, "$1:00");
  return new Date(t).toISOString();
}
const isoOf = (d: Date | string) => iso(d)!;
const n = (v: string | number | null) => (v === null ? null : Number(v));

function toIncident(r: Row): Incident {
  const times = {
    startedAt: isoOf(r.started_at),
    detectedAt: iso(r.detected_at),
    recoveredAt: iso(r.recovered_at),
    endedAt: iso(r.ended_at),
  };
  return {
    id: Number(r.id),
    key: r.key,
    kind: (INCIDENT_KINDS as readonly string[]).includes(r.kind) ? (r.kind as IncidentKind) : "drill",
    region: r.region,
    summary: r.summary,
    ...times,
    open: r.ended_at === null,
    ...durations(times),
    tasksAffected: r.tasks_affected,
    rpo: r.rpo,
    rtoMs: n(r.rto_ms),
    extraPaid: r.extra_paid,
    extraMicros: n(r.extra_micros),
    detail: r.detail ?? {},
    timeline: r.timeline ?? [],
    openedAt: isoOf(r.opened_at),
    updatedAt: isoOf(r.updated_at),
  };
}

export interface Recorded {
  incident: Incident;
  /** The first sighting of this key (a new incident). */
  opened: boolean;
  /** This sighting closed it. */
  closed: boolean;
}

/** Records an observation under its key (idempotent; a concurrent second recorder waits on the row lock). */
export async function recordIncident(sql: postgres.Sql, o: Observation): Promise<Recorded> {
  return sql.begin(async (tx) => {
    const inserted = await tx`insert into incidents (key, kind, region, summary, started_at)
      values (${o.key}, ${o.kind}, ${o.region}, ${o.summary}, ${o.startedAt}::timestamptz)
      on conflict (key) do nothing returning id`;
    const [before] = await tx<Row[]>`select * from incidents where key = ${o.key} for update`;
    const f = o.figures ?? {};
    const fig = (v: number | null | undefined, old: number | string | null) => v ?? (old === null ? null : Number(old));
    const timeline = mergeTimeline(before!.timeline ?? [], o.timeline).slice(-500);
    const [after] = await tx<Row[]>`update incidents set
        summary = ${o.summary},
        detected_at = coalesce(detected_at, ${o.detectedAt ?? null}::timestamptz),
        recovered_at = coalesce(recovered_at, ${o.recoveredAt ?? null}::timestamptz),
        ended_at = coalesce(ended_at, ${o.endedAt ?? null}::timestamptz),
        tasks_affected = ${fig(f.tasksAffected, before!.tasks_affected)},
        rpo = ${fig(f.rpo, before!.rpo)},
        rto_ms = ${fig(f.rtoMs, before!.rto_ms)},
        extra_paid = ${fig(f.extraPaid, before!.extra_paid)},
        extra_micros = ${fig(f.extraMicros, before!.extra_micros)},
        detail = detail || ${JSON.stringify(o.detail ?? {})}::jsonb,
        timeline = ${JSON.stringify(timeline)}::jsonb,
        updated_at = now()
      where key = ${o.key} returning *`;
    return {
      incident: toIncident(after!),
      opened: inserted.length === 1,
      closed: before!.ended_at === null && after!.ended_at !== null,
    };
  });
}

/** Sets a figure computed from the detail (a failover's tasks: the adopted of both phases). */
export async function setTasksAffected(sql: postgres.Sql, key: string, tasks: number): Promise<void> {
  await sql`update incidents set tasks_affected = ${tasks}, updated_at = now() where key = ${key}`;
}

/** The newest incidents by start, at most `limit`. */
export async function listIncidents(sql: postgres.Sql, limit = 50): Promise<Incident[]> {
  const rows = await sql<Row[]>`select * from incidents order by started_at desc, id desc limit ${limit}`;
  return rows.map(toIncident);
}

export async function getIncident(sql: postgres.Sql, id: number): Promise<Incident | undefined> {
  const [row] = await sql<Row[]>`select * from incidents where id = ${id}`;
  return row ? toIncident(row) : undefined;
}

export async function incidentByKey(sql: postgres.Sql, key: string): Promise<Incident | undefined> {
  const [row] = await sql<Row[]>`select * from incidents where key = ${key}`;
  return row ? toIncident(row) : undefined;
}

/** An incident id from outside (URL, CLI): a positive integer, or why not. */
export function parseIncidentId(v: unknown): { ok: true; id: number } | { ok: false; error: string } {
  const s = typeof v === "string" ? v.trim() : typeof v === "number" ? String(v) : "";
  if (!/^[1-9][0-9]{0,14}$/.test(s)) return { ok: false, error: "id: an incident id (a positive integer)" };
  return { ok: true, id: Number(s) };
}
