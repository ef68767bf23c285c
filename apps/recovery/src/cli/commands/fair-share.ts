// `recovery fair-share [--json]`: the region's fair-share groups, weights and queued tasks.
// `recovery fair-share set <file.json | -> [--by WHO]`: replaces them (fair-share/control.ts):
// `{"groups": {"<name>": {"weight": 3, "clients": ["<client id>", ...]}}, "defaultWeight": 1}`.
import { readFileSync } from "node:fs";
import { openRegionBucket } from "@pipeline/shared/kv";
import { openContext, UsageError } from "../../context.ts";
import { describeFairShare, fairShareStatus, setFairShare } from "../../fair-share/control.ts";
import type { CommandOf } from "../args.ts";
import { actorOf, type CliEnv, print } from "../env.ts";

function readInput(path: string): unknown {
  let text: string;
  try {
    text = path === "-" ? readFileSync(0, "utf8") : readFileSync(path, "utf8");
  } catch (err) {
    throw new UsageError(`fair-share set: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? "error"})`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new UsageError(`fair-share set: ${path} is not JSON`);
  }
}

export async function fairShareCommand(cmd: CommandOf<"fair-share">, env: CliEnv): Promise<number> {
  const [sub, path] = cmd.args;
  const input = sub === "set" && path !== undefined ? readInput(path) : undefined;
  const ctx = await openContext(env.config, env.log, "recovery-cli");
  try {
    const region = env.config.REGION;
    if (sub === "set") {
      const deps = { jsm: ctx.jsm, kv: await openRegionBucket(ctx.nc, region), db: ctx.database.db, region };
      const r = await setFairShare(deps, input, `cli:${actorOf(cmd.by)}`);
      if (!r.ok) {
        console.error(`fair-share set refused: ${r.error}`);
        return 1;
      }
    }
    const status = await fairShareStatus(ctx.jsm, region);
    print(cmd.json, status, describeFairShare(status));
    return "error" in status.read ? 1 : 0;
  } finally {
    await ctx.close();
  }
}
