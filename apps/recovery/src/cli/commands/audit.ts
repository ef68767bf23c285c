// `recovery audit`: who changed what (config, keys, drills), newest first.
import { recentAudit } from "../../fleet/audit.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";
import { withFleet } from "../fleet.ts";

export function auditCommand(cmd: CommandOf<"audit">, env: CliEnv): Promise<number> {
  return withFleet(env, undefined, async ({ ctx }) => {
    const rows = await recentAudit(ctx.database.db, cmd.limit ?? 50);
    print(
      cmd.json,
      rows,
      rows
        .map((r) => `${r.at.toISOString()}  ${r.actor.padEnd(24)} ${r.action.padEnd(16)} ${JSON.stringify(r.detail)}`)
        .join("\n") || "no audit entries",
    );
    return 0;
  });
}
