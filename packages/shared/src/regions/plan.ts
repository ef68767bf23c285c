// One provider account's thread plan across regions. The plan record lives in the witness's KV
// (`plan.<key reference>`, beside the region leases): one entry per region, each written only by
// that region's lease keeper while it holds its lease, by compare-and-set on the whole record.
// A region's solvers lease their blocks against the region's share (provider_plan_shares, valid
// only until the region lease's own end), never against the whole plan.
//
// The invariant: what the counted regions claim in the record (each its share, or what it holds if
// that is more) never leaves room for more than the plan, and a region's share is never below what
// it holds at the provider (its count errs high: a task just started is in both). A region
// grows only into room the record shows free, by a write that fails if anyone changed the record
// meanwhile; it shrinks its solvers' cap first and only then the share it shows (never below what
// it still holds). A region cut off from the witness renews neither, so its solvers stop at its
// lease's end; another region counts its share until it has taken the lease over and a release
// time has passed (the cut region's last provider tasks end meanwhile), then drops its entry.
// Pure: decisions only (apps/recovery/src/regions/plan-keeper.ts reads, writes and times).
import { z } from "zod";
import type { Observed } from "./lease.ts";

export const PlanEntry = z.object({
  /** The plan's threads as this region's solvers are configured (the smallest of the counted entries wins). */
  plan: z.number().int().min(0),
  /** What this region may have at the provider at once: never below `used`. */
  share: z.number().int().min(0),
  /** What it would use now: in flight, tasks waiting and the solvers' spare (its solvers' asks). */
  want: z.number().int().min(0),
  /** What it holds: provider tasks in flight and units leased to its solvers. */
  used: z.number().int().min(0),
  /** The writer's wall clock (informational). */
  at: z.number(),
});
export type PlanEntry = z.infer<typeof PlanEntry>;

export const PlanRecord = z.object({ regions: z.record(z.string(), PlanEntry) });
export type PlanRecord = z.infer<typeof PlanRecord>;

/** The witness key of an account's plan record. */
export const planKey = (keyRef: string) => `plan.${keyRef}`;

/** What this region reads from its own database, for one account. */
export interface RegionUse {
  plan: number;
  used: number;
  want: number;
}

export interface PlanDecision {
  /** The cap this region's solvers lease against (it may be below `used`: the blocks shrink to it). */
  target: number;
  /** The share to show in the record: the target, never below what the region holds. */
  share: number;
  /** The plan in force: the smallest configured among the counted entries. */
  plan: number;
  /** Another counted region asks for more than its share. */
  othersStarved: boolean;
  /** Entries of lost regions released (taken over, and past the release time): dropped at the write. */
  drop: string[];
}

/** A lost region's entry stops counting: its lease was taken over by another region, `releaseMs` ago. */
export function released(remote: string, seen: Observed | undefined, now: number, releaseMs: number): boolean {
  return !!seen?.lease && seen.lease.holder !== remote && now - seen.changedAt >= releaseMs;
}

/**
 * This region's share of one account: what it asks for, up to the room the other counted regions
 * leave, and no more than a fair share while another is starved.
 */
export function planShare(
  region: string,
  record: PlanRecord,
  own: RegionUse,
  isReleased: (remote: string) => boolean,
): PlanDecision {
  const others = Object.entries(record.regions).filter(([r]) => r !== region);
  const drop = others.filter(([r]) => isReleased(r)).map(([r]) => r);
  const counted = others.filter(([r]) => !drop.includes(r)).map(([, e]) => e);
  const plan = Math.min(own.plan, ...counted.map((e) => e.plan));
  const claimed = counted.reduce((n, e) => n + Math.max(e.share, e.used), 0);
  const free = Math.max(0, plan - claimed);
  const fair = Math.ceil(plan / (1 + counted.length));
  const othersStarved = counted.some((e) => e.want > e.share);
  const cap = othersStarved ? Math.min(free, fair) : free;
  const target = Math.max(0, Math.min(own.want, cap));
  return { target, share: Math.max(target, own.used), plan, othersStarved, drop };
}

/** The record after this region's write: its entry set, the released entries dropped. */
export function withEntry(record: PlanRecord, region: string, entry: PlanEntry, drop: string[]): PlanRecord {
  const regions: Record<string, PlanEntry> = {};
  for (const [r, e] of Object.entries(record.regions)) if (!drop.includes(r) && r !== region) regions[r] = e;
  regions[region] = entry;
  return { regions };
}

/** Whether the write changes anything the other regions decide on (the clock alone is not a change). */
export function entryChanged(before: PlanEntry | undefined, after: PlanEntry): boolean {
  return (
    !before ||
    before.plan !== after.plan ||
    before.share !== after.share ||
    before.want !== after.want ||
    before.used !== after.used
  );
}
