// Reading the lane records through the JetStream API alone (a message get on the region bucket's
// stream): what a solver's user may do (kvRead of `region_<region>`), so the code that creates
// lane consumers needs no KV handle to carry a lane's pause.
import { JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import type { Priority } from "../schemas/task-types.ts";
import { buckets, LANES } from "../subjects.ts";
import { type LaneRecord, laneKey, parseLaneRecord, pauseUntilOf } from "./record.ts";

/** A lane's record: none (never paused), the record, or why it cannot be used. */
export type LaneRead = { record: LaneRecord | null } | { error: string };

/** No bucket (10059) or no message for the key (10037): no record. */
const absent = (err: unknown) => err instanceof JetStreamApiError && (err.code === 10059 || err.code === 10037);

/** One lane's record from the region bucket. A delete marker is no record. */
export async function readLaneRecord(jsm: JetStreamManager, region: string, lane: Priority): Promise<LaneRead> {
  const bucket = buckets.region(region);
  try {
    const m = await jsm.streams.getMessage(`KV_${bucket}`, { last_by_subj: `$KV.${bucket}.${laneKey(lane)}` });
    const op = m?.header?.get("KV-Operation");
    if (!m || op === "DEL" || op === "PURGE" || m.data.length === 0) return { record: null };
    const p = parseLaneRecord(lane, m.string());
    return p.ok ? { record: p.record } : { error: p.error };
  } catch (err) {
    if (absent(err)) return { record: null };
    throw err;
  }
}

/** Every lane's record of the region. */
export async function readLaneRecords(jsm: JetStreamManager, region: string): Promise<Record<Priority, LaneRead>> {
  const out = {} as Record<Priority, LaneRead>;
  for (const lane of LANES) out[lane] = await readLaneRecord(jsm, region, lane);
  return out;
}

/**
 * The `pause_until` each paused lane's consumers must carry now (a lane that runs, or whose record
 * is unreadable, is left out: its consumers' pause is not touched).
 */
export async function lanePauses(
  jsm: JetStreamManager,
  region: string,
  now = Date.now(),
): Promise<Partial<Record<Priority, string>>> {
  const out: Partial<Record<Priority, string>> = {};
  for (const [lane, read] of Object.entries(await readLaneRecords(jsm, region)) as [Priority, LaneRead][]) {
    const until = "record" in read ? pauseUntilOf(read.record, now) : undefined;
    if (until) out[lane] = until;
  }
  return out;
}
