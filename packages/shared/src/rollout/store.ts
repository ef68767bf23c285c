// The rollout record in NATS KV: the `rollout_control` bucket of the rollout service's own region,
// key `current`. Every write is a compare-and-set on the revision read, so the service and an
// operator's command never overwrite each other; the bucket keeps 64 revisions besides the
// record's own `log`, so `history` can show what the record was at each step. `changeRollout` is
// the one write path of an operator's command (the rollout CLI and the operator console).
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "../nats/index.ts";
import { describeIssues } from "../schemas/index.ts";
import { buckets } from "../subjects.ts";
import { type CommandVerb, command, percentAt, Rollout, withLog } from "./record.ts";

export const CONTROL_BUCKET = "rollout_control";
export const CURRENT_KEY = "current";

export interface Stored {
  record: Rollout;
  revision: number;
}

export interface RolloutStore {
  read(): Promise<Stored | undefined>;
  /** Writes `next` if the record is still at `revision` (0: there is none yet); the new revision, or undefined when someone wrote first. */
  write(next: Rollout, revision: number): Promise<number | undefined>;
  /** Every kept revision of the record, oldest first (unparsable ones skipped). */
  revisions(): Promise<Stored[]>;
}

/**
 * The bucket, created when missing (the rollout service and its CLI). With `region`, a new bucket
 * gets the replica count of that region's workers bucket (what provisioning set from
 * STREAM_REPLICAS), so the record survives a node as the region's other buckets do; an existing
 * bucket is opened as it is (provisioning raises it).
 */
export async function openControlBucket(nc: NatsConnection, region?: string): Promise<KV> {
  const kvm = new Kvm(nc);
  const replicas = region
    ? await kvm
        .open(buckets.workers(region))
        .then((kv) => kv.status())
        .then((s) => s.replicas)
        .catch(() => undefined)
    : undefined;
  return kvm.create(CONTROL_BUCKET, { history: 64, ...(replicas && replicas > 1 ? { replicas } : {}) });
}

export function createRolloutStore(kv: KV): RolloutStore {
  return {
    async read() {
      const e = await kv.get(CURRENT_KEY);
      if (!e || e.operation !== "PUT") return undefined;
      const r = Rollout.safeParse(e.json());
      if (!r.success)
        throw new Error(
          `the stored rollout record (revision ${e.revision}) does not parse: ${describeIssues(r.error)}`,
        );
      return { record: r.data, revision: e.revision };
    },
    async write(next, revision) {
      const body = JSON.stringify(Rollout.parse(next));
      try {
        return revision === 0 ? await kv.create(CURRENT_KEY, body) : await kv.update(CURRENT_KEY, body, revision);
      } catch (err) {
        if (/wrong last sequence|key exists/i.test((err as Error).message)) return undefined;
        throw err;
      }
    },
    async revisions() {
      const out: Stored[] = [];
      for await (const e of await kv.history({ key: CURRENT_KEY })) {
        if (e.operation !== "PUT") continue;
        const r = Rollout.safeParse(e.json());
        if (r.success) out.push({ record: r.data, revision: e.revision });
      }
      return out.sort((a, b) => a.revision - b.revision);
    },
  };
}

export interface ChangeRequest {
  verb: CommandVerb;
  /** Who acts, as the record's reason names them (`rollout-cli alice`, `console:alice`). */
  by: string;
  /** `promote --full`: 100 % in the current region even at a pause step. */
  full?: boolean;
  /** Refuse unless the current rollout is this one (a page showing an older rollout). */
  id?: string;
  now?: () => number;
  /** The audit entry, written after the record (the action is `rollout.<verb>`). */
  audit: (action: string, detail: Record<string, unknown>) => Promise<void>;
}

export type ChangeResult =
  | { ok: true; record: Rollout; revision: number }
  | { ok: false; status: "none" | "refused" | "busy"; reason: string };

/**
 * An operator's command: read the record, apply `command`, write it compare-and-set (read again
 * and retry when someone wrote first, 5 times), then audit it. Refused when there is no rollout,
 * when it is not the one named, or when its state does not allow the command; nothing is written then.
 */
export async function changeRollout(store: RolloutStore, q: ChangeRequest): Promise<ChangeResult> {
  const now = q.now ?? Date.now;
  for (let i = 0; i < 5; i++) {
    const cur = await store.read();
    if (!cur) return { ok: false, status: "none", reason: "there is no rollout" };
    if (q.id !== undefined && q.id !== cur.record.id)
      return { ok: false, status: "refused", reason: `the rollout is now ${cur.record.id}, not ${q.id}` };
    const r = command(cur.record, q.verb, now(), q.by, { full: q.full === true });
    if ("refused" in r) return { ok: false, status: "refused", reason: r.refused };
    const next = withLog(r.next, { action: q.verb, why: r.next.reason ?? q.verb }, new Date(now()));
    const revision = await store.write(next, cur.revision);
    if (revision === undefined) continue;
    await q.audit(`rollout.${q.verb}`, {
      id: next.id,
      state: next.state,
      region: next.plan.regions[next.region],
      step: percentAt(next.plan.steps, next.step),
      ...(q.full ? { full: true } : {}),
    });
    return { ok: true, record: next, revision };
  }
  return { ok: false, status: "busy", reason: "the rollout record kept changing; try again" };
}
