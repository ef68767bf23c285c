// Pausing and resuming a lane of the region: the record first (the truth of who and when, in the
// region bucket), then every lane consumer of that lane (all solver versions) paused or resumed
// through the consumer pause API, then the audit. The console and the CLI both call this module;
// the recovery service's `enforceLanes` mends any consumer that disagrees with its lane's record
// (a pause that raced a consumer update, a consumer recreated after a queue loss).

import type { JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import type { Db } from "@pipeline/shared/db";
import { LaneRecord, laneKey, pauseUntilOf, readLaneRecord, readLaneRecords } from "@pipeline/shared/lanes";
import { isNotFound } from "@pipeline/shared/nats";
import type { Priority } from "@pipeline/shared/schemas";
import { LANES, laneConsumer, streams, versionOfConsumer } from "@pipeline/shared/subjects";
import { recordAudit } from "../fleet/audit.ts";
import { type LaneAction, type LaneConsumer, type LaneState, laneState, recordOf } from "./model.ts";

export interface LaneReadDeps {
  jsm: JetStreamManager;
  region: string;
}

export interface LaneDeps extends LaneReadDeps {
  /** The region bucket (`region_<region>`), where the records live. */
  kv: KV;
  db: Db;
}

export interface LaneChange {
  state: LaneState;
  /** Consumers paused or resumed now. */
  applied: string[];
  /** Consumers the server refused (the service's enforcement tries again). */
  failed: { name: string; error: string }[];
}

/** Every lane consumer of the region's TASKS, by lane (none when TASKS is missing). */
export async function listLaneConsumers(
  jsm: JetStreamManager,
  region: string,
): Promise<Record<Priority, LaneConsumer[]>> {
  const out = { high: [], normal: [], low: [] } as Record<Priority, LaneConsumer[]>;
  const prefixes = LANES.map((lane) => [lane, laneConsumer(region, lane, "")] as const);
  try {
    for await (const c of jsm.consumers.list(streams.tasks(region))) {
      const hit = prefixes.find(([, p]) => c.name.startsWith(p));
      if (!hit) continue;
      out[hit[0]].push({
        name: c.name,
        version: versionOfConsumer(c.name.slice(hit[1].length)).version,
        paused: c.paused === true,
        pauseUntil: (c.config as { pause_until?: string }).pause_until ?? null,
      });
    }
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  for (const lane of LANES) out[lane].sort((a, b) => a.name.localeCompare(b.name));
  return out;
}

/** Every lane of the region: its record, its consumers, paused or running. */
export async function lanesStatus(d: LaneReadDeps, now = Date.now()): Promise<LaneState[]> {
  const [records, consumers] = await Promise.all([
    readLaneRecords(d.jsm, d.region),
    listLaneConsumers(d.jsm, d.region),
  ]);
  return LANES.map((lane) => laneState(lane, records[lane], consumers[lane], now));
}

/** Pauses (until `until`) or resumes (`until` undefined) each consumer; what the server refused is returned. */
async function applyTo(
  jsm: JetStreamManager,
  region: string,
  consumers: LaneConsumer[],
  until: string | undefined,
): Promise<Omit<LaneChange, "state">> {
  const applied: string[] = [];
  const failed: LaneChange["failed"] = [];
  for (const c of consumers) {
    try {
      if (until) await jsm.consumers.pause(streams.tasks(region), c.name, new Date(until));
      else await jsm.consumers.resume(streams.tasks(region), c.name);
      applied.push(c.name);
    } catch (err) {
      failed.push({ name: c.name, error: (err as Error).message.slice(0, 200) });
    }
  }
  return { applied, failed };
}

async function change(d: LaneDeps, a: LaneAction, actor: string, paused: boolean): Promise<LaneChange> {
  const now = new Date();
  const record = LaneRecord.parse(recordOf(a, paused, actor, now));
  await d.kv.put(laneKey(a.lane), JSON.stringify(record));
  const consumers = (await listLaneConsumers(d.jsm, d.region))[a.lane];
  const r = await applyTo(d.jsm, d.region, consumers, pauseUntilOf(record, now.getTime()));
  await recordAudit(d.db, {
    actor,
    action: paused ? "lane.pause" : "lane.resume",
    detail: {
      region: d.region,
      lane: a.lane,
      reason: a.reason ?? null,
      until: record.until ?? null,
      consumers: r.applied,
      ...(r.failed.length ? { failed: r.failed.map((f) => f.name) } : {}),
    },
  });
  const after = (await listLaneConsumers(d.jsm, d.region))[a.lane];
  return { ...r, state: laneState(a.lane, await readLaneRecord(d.jsm, d.region, a.lane), after, Date.now()) };
}

/** Pauses the lane in the region: record, every version's consumer, audit (`lane.pause`). */
export function pauseLane(d: LaneDeps, a: LaneAction, actor: string): Promise<LaneChange> {
  return change(d, a, actor, true);
}

/** Resumes the lane in the region: record, every version's consumer, audit (`lane.resume`). */
export function resumeLane(d: LaneDeps, a: Omit<LaneAction, "for">, actor: string): Promise<LaneChange> {
  return change(d, a, actor, false);
}

const sameInstant = (a: string | null, b: string) => a !== null && Date.parse(a) === Date.parse(b);

/**
 * Makes every lane consumer agree with its lane's record: paused to the record's end while it holds
 * the lane paused, resumed when the record says resumed. A lane without a record, or with an
 * unreadable one, is left alone; so is a pause whose end passed (the server has resumed it).
 * Returns the consumers it changed.
 */
export async function enforceLanes(d: LaneReadDeps, now = Date.now()): Promise<LaneChange["applied"]> {
  const [records, consumers] = await Promise.all([
    readLaneRecords(d.jsm, d.region),
    listLaneConsumers(d.jsm, d.region),
  ]);
  const mended: string[] = [];
  for (const lane of LANES) {
    const read = records[lane];
    if (!("record" in read) || !read.record) continue;
    const until = pauseUntilOf(read.record, now);
    const wrong = until
      ? consumers[lane].filter((c) => !c.paused || !sameInstant(c.pauseUntil, until))
      : read.record.paused
        ? []
        : consumers[lane].filter((c) => c.paused);
    const r = await applyTo(d.jsm, d.region, wrong, until);
    mended.push(...r.applied);
  }
  return mended;
}
