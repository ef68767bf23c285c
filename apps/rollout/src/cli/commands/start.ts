// `rollout start <version> [options]`: a new rollout record; the rollout service carries it out.
import { isEnded, newRollout } from "../../domain/plan.ts";
import { stableOf } from "../../domain/shares.ts";
import { parseStartArgs, planOf } from "../../domain/start-args.ts";
import type { CliArgs } from "../args.ts";
import { type CliContext, show } from "../context.ts";

/** Refused (3) while a rollout runs; the stable version by default: the one that pulls most shards of the first region. */
export async function startCommand(ctx: CliContext, { rest }: CliArgs): Promise<number> {
  const a = parseStartArgs(rest);
  const cur = await ctx.store.read();
  if (cur && !isEnded(cur.record)) {
    console.error(`rollout start: rollout ${cur.record.id} is ${cur.record.state}; abort it or let it end first`);
    return 3;
  }
  const regions = a.regions ?? ctx.links.map((l) => l.name);
  const first = ctx.links.find((l) => l.name === regions[0]);
  const assignment = first ? await first.assignment() : undefined;
  if (!assignment)
    throw new Error(
      `region ${regions[0]} has no shard assignment yet (no solver has started there), or is not configured`,
    );
  const plan = planOf(a, { stable: stableOf(assignment), regions });
  for (const r of plan.regions)
    if (!ctx.links.some((l) => l.name === r))
      throw new Error(`region ${r} is not configured (REGIONS, NATS_URL_${r.toUpperCase()})`);
  const record = newRollout(plan, new Date(), ctx.by);
  if ((await ctx.store.write(record, cur?.revision ?? 0)) === undefined)
    throw new Error("the rollout record changed meanwhile; try again");
  await ctx.auditTo("rollout.start", { id: record.id, plan });
  show(ctx, record, `started ${record.id}: ${record.log[0]!.why}`);
  return 0;
}
