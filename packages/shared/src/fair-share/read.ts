// Reading the fair-share record through the JetStream API alone (a message get on the region
// bucket's stream, as lanes/read.ts does): what the gateway's and the solver's users may do.
import { JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import { buckets } from "../subjects.ts";
import type { GroupOf } from "./message.ts";
import { FAIR_SHARE_KEY, type FairShare, fairShareView, parseFairShare } from "./record.ts";

/** None stored (every client shares the lanes' own subjects), the record, or why it cannot be used. */
export type FairShareRead = { record: FairShare | null; revision: number } | { error: string; revision: number };

/** No bucket (10059) or no message for the key (10037): no record. */
const absent = (err: unknown) => err instanceof JetStreamApiError && (err.code === 10059 || err.code === 10037);

export async function readFairShare(jsm: JetStreamManager, region: string): Promise<FairShareRead> {
  const bucket = buckets.region(region);
  try {
    const m = await jsm.streams.getMessage(`KV_${bucket}`, { last_by_subj: `$KV.${bucket}.${FAIR_SHARE_KEY}` });
    const op = m?.header?.get("KV-Operation");
    if (!m || op === "DEL" || op === "PURGE" || m.data.length === 0) return { record: null, revision: m?.seq ?? 0 };
    const p = parseFairShare(m.string());
    return p.ok ? { record: p.record, revision: m.seq } : { error: p.error, revision: m.seq };
  } catch (err) {
    if (absent(err)) return { record: null, revision: 0 };
    throw err;
  }
}

/**
 * The record kept current by a read every `everyMs`: `current()` is the last valid one (a record
 * that does not parse is reported once per revision and the previous kept: a bad edit changes
 * nothing). `onChange` is called when the valid record's revision changes.
 */
export function pollFairShare(o: {
  jsm: JetStreamManager;
  region: string;
  everyMs?: number;
  onRejected?(error: string): void;
  onChange?(record: FairShare | null): void;
  /** After each timed read (changed or not), with the record in use. */
  onTick?(record: FairShare | null): Promise<void> | void;
  onError?(err: Error): void;
}): { current(): FairShare | null; refresh(): Promise<void>; stop(): void } {
  let current: FairShare | null = null;
  let revision = -1;
  let rejected = -1;
  const refresh = async () => {
    const r = await readFairShare(o.jsm, o.region);
    if ("error" in r) {
      if (r.revision !== rejected) o.onRejected?.(r.error);
      rejected = r.revision;
      return;
    }
    if (r.revision === revision) return;
    revision = r.revision;
    current = r.record;
    o.onChange?.(current);
  };
  const tick = async () => {
    await refresh().catch((err: Error) => o.onError?.(err));
    await o.onTick?.(current);
  };
  const timer = setInterval(() => void tick(), o.everyMs ?? 5000);
  return { current: () => current, refresh, stop: () => clearInterval(timer) };
}

/**
 * The groups of the record stored now, for a one-off run that queues tasks again (recovery's
 * sweep, rebuild, adoption, the console's redrive). A record that cannot be read or does not parse
 * is reported (`onProblem`) and the tasks go on their lanes' own subjects: served with the default
 * group, never held back.
 */
export async function groupsNow(
  jsm: JetStreamManager,
  region: string,
  onProblem: (why: string) => void,
): Promise<GroupOf> {
  try {
    const r = await readFairShare(jsm, region);
    if ("error" in r) {
      onProblem(r.error);
      return () => undefined;
    }
    return fairShareView(r.record).groupOf;
  } catch (err) {
    onProblem((err as Error).message);
    return () => undefined;
  }
}
