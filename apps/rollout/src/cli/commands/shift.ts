// `rollout shift <version> <N|P%>`: by hand, one region (REGION): give <version> N shards (or P %)
// of it, taken from the other versions; the layer a rollout drives.
import { shiftTo } from "../../adapters/shift.ts";
import { shardCount } from "../../domain/shares.ts";
import { type CliArgs, USAGE, Version } from "../args.ts";
import { type CliContext, show } from "../context.ts";

export async function shiftCommand(ctx: CliContext, { rest, also }: CliArgs): Promise<number> {
  const l = ctx.home;
  const version = Version.safeParse(rest[0]);
  if (!version.success || rest.length !== 2) {
    console.error(`rollout shift: takes <version> <N|P%>\n\n${USAGE}`);
    return 2;
  }
  const total = (await l.assignment())?.owners.length ?? 16;
  let count: number;
  try {
    count = shardCount(rest[1]!, total);
  } catch (err) {
    console.error(`rollout shift: ${(err as Error).message}`);
    return 2;
  }
  const r = await shiftTo({
    jsm: l.jsm,
    kv: l.shards,
    region: l.name,
    to: version.data,
    count,
    by: ctx.by,
    ackWaitMs: ctx.config.ACK_WAIT_MS,
    versions: also,
  });
  await ctx.auditTo("rollout.shift", { region: l.name, version: version.data, moved: r.moved });
  show(
    ctx,
    r,
    `moved ${r.moved.length ? r.moved.join(",") : "nothing"} to ${version.data}; now ${Object.entries(r.share)
      .map(([v, n]) => `${v} ${n}`)
      .join(", ")}; consumers changed: ${r.changed.length}`,
  );
  return 0;
}
