// Moving work between solver versions of a region: the assignment first (compare-and-set), then
// the consumers (shrink before grow). Used by the CLI (`shift`, `reconcile`) and the controller.
import type { JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import {
  consumerGroups,
  consumerVersions,
  moveShards,
  readAssignment,
  reconcileConsumers,
  type ShardAssignment,
  shardsToReach,
  shareOf,
  writeAssignment,
} from "@pipeline/shared/shards";
import { versionsOf } from "../domain/shares.ts";

export interface ShiftResult {
  moved: number[];
  share: Record<string, number>;
  changed: string[];
}

/** Gives `to` enough shards to own `count` (taken from the others), then reconciles every version's consumers. */
export async function shiftTo(o: {
  jsm: JetStreamManager;
  kv: KV;
  region: string;
  to: string;
  count: number;
  by: string;
  ackWaitMs: number;
  versions?: string[];
}): Promise<ShiftResult> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const cur = await readAssignment(o.kv);
    if (!cur) throw new Error(`region ${o.region} has no shard assignment yet: start a solver first`);
    const moved = shardsToReach(cur.assignment, o.to, o.count);
    const next = moved.length ? moveShards(cur.assignment, moved, o.to, o.by) : cur.assignment;
    if (moved.length) {
      try {
        await writeAssignment(o.kv, next, cur.revision);
      } catch {
        continue; // someone else changed it meanwhile: read again
      }
    }
    // Every version with consumers: the ones losing their last shard must shrink to idle too.
    const { changed } = await reconcileConsumers(
      o.jsm,
      o.region,
      next,
      versionsOf(next, [
        o.to,
        ...cur.assignment.owners,
        ...(await consumerVersions(o.jsm, o.region)),
        ...(o.versions ?? []),
      ]),
      o.ackWaitMs,
      // A fair-share group no longer configured still has consumers (and maybe tasks): moved too.
      await consumerGroups(o.jsm, o.region),
    );
    return { moved, share: shareOf(next), changed };
  }
  throw new Error("the assignment kept changing under us; try again");
}

/** Gives every shard back to `to` (a rollback, or the last step of a rollout). */
export async function shiftAll(o: Omit<Parameters<typeof shiftTo>[0], "count">): Promise<ShiftResult> {
  const cur = await readAssignment(o.kv);
  return shiftTo({ ...o, count: cur?.assignment.owners.length ?? 0 });
}

/** Makes the region's lane consumers match `a` for its owners, every version with consumers, and `also`. */
export async function reconcileRegion(o: {
  jsm: JetStreamManager;
  region: string;
  assignment: ShardAssignment;
  also: string[];
  ackWaitMs: number;
}): ReturnType<typeof reconcileConsumers> {
  return reconcileConsumers(
    o.jsm,
    o.region,
    o.assignment,
    versionsOf(o.assignment, [...(await consumerVersions(o.jsm, o.region)), ...o.also]),
    o.ackWaitMs,
    await consumerGroups(o.jsm, o.region),
  );
}
