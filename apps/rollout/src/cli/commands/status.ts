// `rollout status [--json]`: the rollout, and per region which version pulls which shard and runs
// how many processes (a region out of reach is shown as such).
import { shareOf } from "@pipeline/shared/shards";
import type { RegionLink } from "../../adapters/regions.ts";
import { percentAt, type Rollout } from "../../domain/plan.ts";
import { describeAssignment } from "../../domain/shares.ts";
import { type CliContext, show } from "../context.ts";

function describeRollout(r: Rollout): string[] {
  const lines = [
    `rollout ${r.id}: ${r.plan.version} replacing ${r.plan.stable}, ${r.state}${r.state === "running" || r.state === "paused" ? ` at ${percentAt(r.plan.steps, r.step)}% in ${r.plan.regions[r.region]}${r.awaiting === "promotion" ? " (pause step: promote goes on)" : ""}` : ""}${r.applied ? "" : " (not applied yet)"}${r.reason ? ` (${r.reason})` : ""}`,
  ];
  const last = r.log.at(-1);
  if (last) lines.push(`  last: ${last.at} ${last.action}: ${last.why}`);
  return lines;
}

/** One region's share and processes, as data and as lines. */
async function describeRegion(l: RegionLink): Promise<{ value: unknown; lines: string[] }> {
  try {
    const a = await l.assignment();
    const processes: Record<string, number> = {};
    for (const b of (await l.heartbeats([])).beats) processes[b.version] = (processes[b.version] ?? 0) + 1;
    return {
      value: { share: a ? shareOf(a) : {}, processes },
      lines: [
        `region ${l.name}: processes ${
          Object.entries(processes)
            .map(([v, n]) => `${v} ${n}`)
            .join(", ") || "none"
        }`,
        ...(a
          ? describeAssignment(a)
              .split("\n")
              .map((x) => `  ${x}`)
          : ["  no assignment yet"]),
      ],
    };
  } catch (err) {
    return {
      value: { error: (err as Error).message },
      lines: [`region ${l.name}: unreachable (${(err as Error).message})`],
    };
  }
}

export async function statusCommand(ctx: CliContext): Promise<number> {
  const cur = await ctx.store.read();
  const regions: Record<string, unknown> = {};
  const lines = cur ? describeRollout(cur.record) : ["no rollout"];
  for (const l of ctx.links) {
    const d = await describeRegion(l);
    regions[l.name] = d.value;
    lines.push(...d.lines);
  }
  show(ctx, { rollout: cur?.record ?? null, revision: cur?.revision ?? null, regions }, lines.join("\n"));
  return 0;
}
