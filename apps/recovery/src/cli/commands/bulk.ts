// `recovery redrive-all` and `recovery cancel-all`: the console's bulk actions on the command line
// (the same module, bulk/run.ts; the same rules; the same audit action, `bulk.redrive` /
// `bulk.cancel`, by the login). Without --yes: the preview (count, oldest ids, the limit), nothing
// changed. With --yes: the run, and what it did.
import { type BulkAction, describeFilter, parseBulkFilter } from "../../bulk/filter.ts";
import { previewBulk, runBulk } from "../../bulk/run.ts";
import { bulkDeps } from "../../console/bulk.ts";
import { openContext } from "../../context.ts";
import type { CommandOf } from "../args.ts";
import { actorOf, type CliEnv, print } from "../env.ts";
import { filterInputOf, filterUsageError } from "./task-filter.ts";

type BulkCommand = CommandOf<"redrive-all"> | CommandOf<"cancel-all">;

async function bulkCommand(action: BulkAction, cmd: BulkCommand, env: CliEnv): Promise<number> {
  const { config, log } = env;
  const parsed = parseBulkFilter(action, filterInputOf(cmd), config.REGION);
  if (!parsed.ok) throw filterUsageError(parsed.error);
  const ctx = await openContext(config, log, "recovery-bulk");
  try {
    const deps = bulkDeps({ config, ctx, log, invalidate: () => {} });
    const p = await previewBulk(deps, action, parsed.filter);
    const head = `${describeFilter(p.filter)}\n${p.line}${p.sample.length ? `\noldest: ${p.sample.join(", ")}${p.count > p.sample.length ? ", …" : ""}` : ""}`;
    if (!cmd.yes) {
      print(cmd.json, p, p.count ? `${head}\nnothing changed: run again with --yes to ${action} them` : head);
      return 0;
    }
    const r = await runBulk(deps, action, p.filter, { actor: actorOf(cmd.by), via: "cli", previewed: p.count });
    print(cmd.json, r, `${head}\n${r.line} (audit entry ${r.auditId})`);
    return r.done === r.attempted ? 0 : 1;
  } finally {
    await ctx.close();
  }
}

export const redriveAllCommand = (cmd: CommandOf<"redrive-all">, env: CliEnv) => bulkCommand("redrive", cmd, env);
export const cancelAllCommand = (cmd: CommandOf<"cancel-all">, env: CliEnv) => bulkCommand("cancel", cmd, env);
