// The incident detector (in the recovery service, one tick every few seconds): reads the sources
// and records what they say as incidents (store.ts; the decisions are in rollback.ts, failover.ts,
// breaker.ts). Sources: the rollout record (KV `rollout_control`, key `current`, and its kept
// revisions at the first tick), the adoption records of this region's bucket (`adopted.<remote>`,
// several regions only), the solvers' breaker events on EVENTS (`events.<region>.breaker`, from an
// hour back at the first tick) and their heartbeats. Drills and restores record their own incident.
// Recording is idempotent by key, so a restart, or two services seeing the same thing, make one row.
import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { liveWorkers } from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";
import { eventSubject, streams } from "@pipeline/shared/subjects";
import type postgres from "postgres";
import { BreakerEvent, breakerTracker } from "./breaker.ts";
import { AdoptionRecord, failoverKey, failoverObservation } from "./failover.ts";
import type { Observation } from "./model.ts";
import { parseRolloutRecord, rollbackObservation } from "./rollback.ts";
import { recordIncident } from "./store.ts";

export interface DetectorDeps {
  sql: postgres.Sql;
  region: string;
  log: Logger;
  /** The rollout service's bucket when this region has one (opened, never created); undefined otherwise. */
  rolloutControl: () => Promise<KV | undefined>;
  /** This region's bucket (adoption records), with several regions. */
  regionKv?: KV;
  /** The lease's TTL + margin: how long a region was still when it was taken over. */
  leaseStillMs: number;
  /** EVENTS (breaker events) and the heartbeats; without them no breaker storm is seen. */
  events?: { js: JetStreamClient; jsm: JetStreamManager; workersKv: KV };
  /** How long a breaker must stay open to be an incident (default 60 s). */
  breakerMinOpenMs?: number;
  /** Told of each incident this detector opened (the notifications: docs/notifications.md). */
  onOpened?: (o: Observation, id: number) => void;
  /** How far back the first tick reads breaker events (default 1 h). */
  lookbackMs?: number;
  now?: () => number;
}

export interface TickReport {
  recorded: number;
  opened: string[];
  closed: string[];
  errors: string[];
}

export interface Detector {
  tick(): Promise<TickReport>;
}

const parse = (e: { json(): unknown }): unknown => {
  try {
    return e.json();
  } catch {
    return undefined;
  }
};

/** The rollout record's revisions to look at: every kept one at the first tick, then the current one when it changed. */
async function rolloutObservations(d: DetectorDeps, st: { rev: number; first: boolean }): Promise<Observation[]> {
  const kv = await d.rolloutControl();
  if (!kv) return [];
  const out: Observation[] = [];
  const take = (value: unknown, revision: number) => {
    const p = parseRolloutRecord(value);
    if (!p.ok) {
      d.log.warn({ revision, err: p.error }, "incidents: rollout record does not parse");
      return;
    }
    const o = rollbackObservation(p.record, d.region);
    if (o) out.push(o);
  };
  if (st.first)
    for await (const e of await kv.history({ key: "current" })) if (e.operation === "PUT") take(parse(e), e.revision);
  const cur = await kv.get("current");
  if (cur && cur.operation === "PUT" && cur.revision !== st.rev) {
    take(parse(cur), cur.revision);
    st.rev = cur.revision;
  }
  st.first = false;
  return out;
}

/** Adoption records of this region's bucket: a failover per (remote, epoch), seen once per process. */
async function failoverObservations(d: DetectorDeps, seen: Set<string>): Promise<Observation[]> {
  if (!d.regionKv) return [];
  const out: Observation[] = [];
  for await (const k of await d.regionKv.keys("adopted.>")) {
    const e = await d.regionKv.get(k);
    const r = e?.operation === "PUT" ? AdoptionRecord.safeParse(parse(e)) : undefined;
    if (!r?.success) continue;
    const remote = k.slice("adopted.".length);
    const key = failoverKey(remote, r.data.epoch);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(
      failoverObservation({
        local: d.region,
        remote,
        epoch: r.data.epoch,
        takenOverAt: r.data.at,
        adoptedAt: r.data.at,
        stillMs: d.leaseStillMs,
      }),
    );
  }
  return out;
}

/** Reads the breaker events after the cursor into the tracker (no consumer when nothing new). */
async function readBreakerEvents(
  d: DetectorDeps,
  ev: NonNullable<DetectorDeps["events"]>,
  tracker: ReturnType<typeof breakerTracker>,
  cursor: { nextSeq: number },
): Promise<void> {
  const stream = streams.events(d.region);
  const subject = eventSubject(d.region, "breaker");
  const last = await ev.jsm.streams.getMessage(stream, { last_by_subj: subject }).catch(() => null);
  if (!last || last.seq < cursor.nextSeq) return;
  const now = (d.now ?? Date.now)();
  const start =
    cursor.nextSeq > 0
      ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: cursor.nextSeq }
      : {
          deliver_policy: DeliverPolicy.StartTime,
          opt_start_time: new Date(now - (d.lookbackMs ?? 3600_000)).toISOString(),
        };
  const consumer = await ev.js.consumers.get(stream, { ...start, filter_subjects: [subject] });
  try {
    for (let done = false; !done; ) {
      const batch = await consumer.fetch({ max_messages: 500, expires: 1000 });
      let got = 0;
      for await (const m of batch) {
        got++;
        cursor.nextSeq = m.seq + 1;
        const b = BreakerEvent.safeParse(parse(m));
        if (b.success) tracker.add(m.seq, b.data);
        if (m.info.pending === 0 || m.seq >= last.seq) done = true;
        if (done) break;
      }
      if (got === 0) done = true;
    }
  } finally {
    await consumer.delete().catch(() => {});
  }
}

/** Breaker storms: the tracker fed from EVENTS, the workers without a heartbeat pruned. */
async function breakerObservations(
  d: DetectorDeps,
  tracker: ReturnType<typeof breakerTracker>,
  cursor: { nextSeq: number },
): Promise<Observation[]> {
  if (!d.events) return [];
  await readBreakerEvents(d, d.events, tracker, cursor);
  const now = (d.now ?? Date.now)();
  // The bucket is listed only while a breaker is open: each listing leaves an ordered consumer on
  // the server for minutes, and with nothing open there is nothing to prune (the call then only
  // drops old episodes).
  const live = tracker.anyOpen()
    ? new Set((await liveWorkers(d.events.workersKv, now)).workers.map((w) => w.workerId))
    : new Set<string>();
  tracker.prune(live, now);
  return tracker.observations(d.region, now);
}

export function createDetector(d: DetectorDeps): Detector {
  const rollout = { rev: 0, first: true };
  const failovers = new Set<string>();
  const tracker = breakerTracker(d.breakerMinOpenMs ?? 60_000);
  const cursor = { nextSeq: 0 };
  /** What was last recorded per key (open or closed): a sighting that changes nothing is not written again. */
  const written = new Map<string, string>();
  const sources: Array<[string, () => Promise<Observation[]>]> = [
    ["rollout", () => rolloutObservations(d, rollout)],
    ["failover", () => failoverObservations(d, failovers)],
    ["breaker", () => breakerObservations(d, tracker, cursor)],
  ];
  return {
    async tick() {
      const report: TickReport = { recorded: 0, opened: [], closed: [], errors: [] };
      for (const [name, read] of sources) {
        try {
          for (const o of await read()) {
            const sig = `${o.endedAt ?? "open"}:${o.timeline.length}`;
            if (written.get(o.key) === sig) continue;
            const r = await recordIncident(d.sql, o);
            written.set(o.key, sig);
            report.recorded++;
            if (r.opened) {
              report.opened.push(o.key);
              d.onOpened?.(o, r.incident.id);
            }
            if (r.closed) report.closed.push(o.key);
            if (r.opened || r.closed)
              d.log.warn(
                { incident: r.incident.id, ref: o.key, kind: o.kind, region: o.region, open: r.incident.open },
                r.opened ? `incident opened: ${o.summary}` : `incident closed: ${o.summary}`,
              );
          }
        } catch (err) {
          report.errors.push(`${name}: ${(err as Error).message}`);
        }
      }
      if (report.errors.length) d.log.warn({ errors: report.errors }, "incidents: a source could not be read");
      return report;
    },
  };
}
