// `recovery rebuild-queue`: recreate TASKS if missing and re-publish every unfinished task.
import { openContext } from "../../context.ts";
import { rebuildQueue } from "../../queue/rebuild-queue.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";

export async function rebuildQueueCommand(cmd: CommandOf<"rebuild-queue">, { config, log }: CliEnv): Promise<number> {
  const ctx = await openContext(config, log, "recovery-cli");
  try {
    const r = await rebuildQueue(ctx, { gatewayGraceMs: config.GATEWAY_PUBLISH_GRACE_MS });
    print(
      cmd.json,
      r,
      `rebuild-queue: ${r.stream} ${r.created ? "was missing and is created" : "exists"}; ${r.open} unfinished task(s): ${r.republished} re-published (${r.held} of them held until their start), ${r.withMessage} already had a message, ${r.duplicates} deduplicated, ${r.deferred} fresh ones re-checked after the gateway's grace (${r.ms} ms)\n` +
        "next: restart the solvers if TASKS was recreated (they recreate their consumers on start)",
    );
    return 0;
  } finally {
    await ctx.close();
  }
}
