// `rollout reconcile [--also v2,v3]`: make REGION's lane consumers match its assignment (after an
// interrupted shift): every version that owns shards or has consumers, and those named.
import { reconcileRegion } from "../../adapters/shift.ts";
import type { CliArgs } from "../args.ts";
import { type CliContext, show } from "../context.ts";

export async function reconcileCommand(ctx: CliContext, { also }: CliArgs): Promise<number> {
  const l = ctx.home;
  const assignment = await l.assignment();
  if (!assignment) throw new Error(`region ${l.name} has no assignment yet`);
  const r = await reconcileRegion({ jsm: l.jsm, region: l.name, assignment, also, ackWaitMs: ctx.config.ACK_WAIT_MS });
  show(ctx, r, `reconciled: ${r.changed.length ? r.changed.join(", ") : "nothing to change"}`);
  return 0;
}
