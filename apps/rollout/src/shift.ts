// Moving work between solver versions of a region: the assignment first (compare-and-set), then
// the consumers (shrink before grow). Used by the CLI; the rollout plan (not built yet) will call it.
import type { JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { consumerVersions, moveShards, ownedShards, readAssignment, reconcileConsumers, shardsToReach, shareOf, writeAssignment, type ShardAssignment } from "@pipeline/shared/runtime";

export interface ShiftResult {
  moved: number[];
  share: Record<string, number>;
  changed: string[];
}

/** The number of shards a share means: `4` is 4 shards, `25%` a quarter of them (rounded up, at least 1 for a share above 0). */
export function shardCount(spec: string, total: number): number {
  const m = /^(\d{1,4})(%?)$/.exec(spec.trim());
  if (!m) throw new Error(`share ${JSON.stringify(spec)}: a number of shards (4) or a percentage (25%)`);
  const n = Number(m[1]);
  if (m[2]) {
    if (n > 100) throw new Error(`share ${spec}: at most 100%`);
    return n === 0 ? 0 : Math.max(1, Math.ceil((n / 100) * total));
  }
  if (n > total) throw new Error(`share ${spec}: the region has ${total} shards`);
  return n;
}

/** Gives `to` enough shards to own `count` (taken from the others), then reconciles every version's consumers. */
export async function shiftTo(o: { jsm: JetStreamManager; kv: KV; region: string; to: string; count: number; by: string; ackWaitMs: number; versions?: string[] }): Promise<ShiftResult> {
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
    const { changed } = await reconcileConsumers(o.jsm, o.region, next, versionsOf(next, [o.to, ...cur.assignment.owners, ...(await consumerVersions(o.jsm, o.region)), ...(o.versions ?? [])]), o.ackWaitMs);
    return { moved, share: shareOf(next), changed };
  }
  throw new Error("the assignment kept changing under us; try again");
}

/** Gives every shard back to `to` (a rollback, or the last step of a rollout). */
export async function shiftAll(o: Omit<Parameters<typeof shiftTo>[0], "count">): Promise<ShiftResult> {
  const cur = await readAssignment(o.kv);
  return shiftTo({ ...o, count: cur?.assignment.owners.length ?? 0 });
}

/** Versions whose consumers a reconcile must look at: those that own shards and those named. */
export function versionsOf(a: ShardAssignment, named: string[]): string[] {
  return [...new Set([...a.owners, ...named])];
}

export function describeAssignment(a: ShardAssignment): string {
  const share = shareOf(a);
  return Object.entries(share)
    .map(([v, n]) => `${v}: ${n}/${a.owners.length} shards (${ownedShards(a, v).join(",")})`)
    .join("\n");
}
