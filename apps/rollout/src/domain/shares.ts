// A region's shards as numbers, pure (shares.test.ts): what a share means in shards, which
// versions' consumers a reconcile looks at, and the assignment described for people. The moves
// themselves (KV and consumers) are adapters/shift.ts.
import { ownedShards, type ShardAssignment, shareOf } from "@pipeline/shared/shards";

/** The shards `percent` % of `total` means: rounded up, at least 1 for a share above 0. */
export function shardsForPercent(percent: number, total: number): number {
  if (!Number.isInteger(percent) || percent < 0 || percent > 100)
    throw new Error(`share ${percent}%: a whole percentage from 0 to 100`);
  return percent === 0 ? 0 : Math.max(1, Math.ceil((percent / 100) * total));
}

/** The number of shards a share means: `4` is 4 shards, `25%` a quarter of them (rounded up, at least 1 for a share above 0). */
export function shardCount(spec: string, total: number): number {
  const m = /^(\d{1,4})(%?)$/.exec(spec.trim());
  if (!m) throw new Error(`share ${JSON.stringify(spec)}: a number of shards (4) or a percentage (25%)`);
  const n = Number(m[1]);
  if (m[2]) {
    if (n > 100) throw new Error(`share ${spec}: at most 100%`);
    return shardsForPercent(n, total);
  }
  if (n > total) throw new Error(`share ${spec}: the region has ${total} shards`);
  return n;
}

/** Versions whose consumers a reconcile must look at: those that own shards and those named. */
export function versionsOf(a: ShardAssignment, named: string[]): string[] {
  return [...new Set([...a.owners, ...named])];
}

/** One line per version: how many of the region's shards it owns, and which. */
export function describeAssignment(a: ShardAssignment): string {
  const share = shareOf(a);
  return Object.entries(share)
    .map(([v, n]) => `${v}: ${n}/${a.owners.length} shards (${ownedShards(a, v).join(",")})`)
    .join("\n");
}

/** The version that pulls most shards (the first listed among equals): a rollout's default stable version. */
export function stableOf(a: ShardAssignment): string {
  return Object.entries(shareOf(a)).sort((x, y) => y[1] - x[1])[0]![0];
}
