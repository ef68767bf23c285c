// Carrying out a decision, pure (placement.test.ts): before the shards move, whether they may
// (every region that is to get canary shards runs the canary), must wait, or the rollout rolls
// back because the canary never came up within the progress deadline; and what a region's share
// means as a move (who gets how many shards). The controller does the moves (adapters/shift.ts).
import { desiredPercent, type Rollout, type RolloutPlan, withLog } from "./plan.ts";
import { shardsForPercent } from "./shares.ts";

/** What the controller does with an unapplied record. */
export type Placement =
  | { kind: "move" }
  | { kind: "wait"; why: string }
  | { kind: "rollback"; region: string; why: string; next: Rollout };

/**
 * Work goes only to a version that runs there: moving shards to no process would stall them. The
 * first region (in plan order) that is to get canary shards but has no canary process holds the
 * move; past the progress deadline a running rollout is rolled back instead (`next`, unapplied,
 * with its log line). A rolled back or aborted record wants 0 % everywhere, so it always moves.
 */
export function placement(r: Rollout, canaryProcesses: (region: string) => number, nowMs: number): Placement {
  for (const [i, name] of r.plan.regions.entries()) {
    if (desiredPercent(r, i) === 0 || canaryProcesses(name) > 0) continue;
    const why = `no ${r.plan.version} process in ${name} (heartbeats)`;
    if (r.state !== "running" || nowMs - r.stepStartedAt <= r.plan.progressDeadlineMs) return { kind: "wait", why };
    const next = withLog(
      { ...r, state: "rolledBack", reason: `${why} within ${r.plan.progressDeadlineMs} ms`, applied: false },
      { action: "rollback", region: name, why },
      new Date(nowMs),
    );
    return { kind: "rollback", region: name, why, next };
  }
  return { kind: "move" };
}

/** A region's share as a move: the canary `percent` % of its `total` shards, or at 0 % every shard back to the stable version. */
export function moveFor(
  plan: Pick<RolloutPlan, "version" | "stable">,
  percent: number,
  total: number,
): { to: string; count: number } {
  return percent === 0
    ? { to: plan.stable, count: total }
    : { to: plan.version, count: shardsForPercent(percent, total) };
}
