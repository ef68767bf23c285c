// `recovery lanes [pause <lane> [--reason WHY] [--for 30m] | resume <lane>] [--by WHO] [--json]`:
// the lanes of the region, paused or running; a pause or resume through the same module as the
// console (lanes/control.ts), audited as `lane.pause` / `lane.resume` with the actor `cli:<login>@<host>`.
import { openRegionBucket } from "@pipeline/shared/kv";
import { openContext, UsageError } from "../../context.ts";
import { type LaneChange, lanesStatus, pauseLane, resumeLane } from "../../lanes/control.ts";
import { describeLane, parseLaneAction } from "../../lanes/model.ts";
import type { CommandOf } from "../args.ts";
import { actorOf, type CliEnv, print } from "../env.ts";

/** What a pause or resume did, for people. */
function changed(verb: string, r: LaneChange): string {
  const lines = [describeLane(r.state), `${verb}: ${r.applied.join(", ") || "no consumer of this lane yet"}`];
  for (const f of r.failed) lines.push(`NOT ${verb}: ${f.name}: ${f.error} (the recovery service tries again)`);
  return lines.join("\n");
}

export async function lanesCommand(cmd: CommandOf<"lanes">, env: CliEnv): Promise<number> {
  const [sub, lane] = cmd.args;
  const asked = sub ? parseLaneAction({ lane, reason: cmd.reason, for: cmd.for }) : undefined;
  if (asked && !asked.ok)
    throw new UsageError(asked.error.replaceAll("for:", "--for:").replaceAll("reason:", "--reason:"));
  if (sub === "resume" && cmd.for !== undefined) throw new UsageError("--for: only a pause takes a duration");
  if (!sub && (cmd.reason !== undefined || cmd.for !== undefined))
    throw new UsageError("--reason and --for go with `lanes pause <lane>`");
  const ctx = await openContext(env.config, env.log, "recovery-cli");
  try {
    const region = env.config.REGION;
    if (!asked) {
      const lanes = await lanesStatus({ jsm: ctx.jsm, region });
      print(cmd.json, lanes, [`lanes of region ${region}:`, ...lanes.map((l) => `  ${describeLane(l)}`)].join("\n"));
      return 0;
    }
    const deps = { jsm: ctx.jsm, kv: await openRegionBucket(ctx.nc, region), db: ctx.database.db, region };
    const actor = `cli:${actorOf(cmd.by)}`;
    const r =
      sub === "pause" ? await pauseLane(deps, asked.action, actor) : await resumeLane(deps, asked.action, actor);
    print(cmd.json, r, changed(sub === "pause" ? "paused" : "resumed", r));
    return r.failed.length ? 1 : 0;
  } finally {
    await ctx.close();
  }
}
