// `recovery recover-stale`: re-publish stale tasks that have no message in TASKS.
import { openContext } from "../../context.ts";
import { recoverStale } from "../../sweep/recover-stale.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";

export async function recoverStaleCommand(cmd: CommandOf<"recover-stale">, { config, log }: CliEnv): Promise<number> {
  const ctx = await openContext(config, log, "recovery-cli");
  try {
    const r = await recoverStale(ctx, { staleAfterMs: cmd["older-than"] ?? config.STALE_AFTER_MS });
    const lines = [
      `stale sweep: ${r.candidates} candidate(s), ${r.republished} re-published, ${r.withMessage} still have a message, ${r.changed} changed meanwhile, ${r.duplicates} already re-published (${r.ms} ms; scanned ${r.scan.messages} messages)`,
      ...r.tasks
        .slice(0, 50)
        .map((t) => `  ${t.id}  ${t.state.padEnd(8)} v${t.version}  ${t.why.padEnd(13)}  ${t.action}`),
    ];
    print(cmd.json, r, lines.join("\n"));
    return 0;
  } finally {
    await ctx.close();
  }
}
