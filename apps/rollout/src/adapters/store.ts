// The rollout record in NATS KV: the `rollout_control` bucket of the rollout service's own region,
// key `current`. Every write is a compare-and-set on the revision read, so the service and an
// operator's command never overwrite each other; the bucket keeps 64 revisions besides the
// record's own `log`, so `history` can show what the record was at each step.
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@pipeline/shared/nats";
import { describeIssues } from "@pipeline/shared/schemas";
import { Rollout } from "../domain/plan.ts";

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

export async function openControlBucket(nc: NatsConnection): Promise<KV> {
  return new Kvm(nc).create(CONTROL_BUCKET, { history: 64 });
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
