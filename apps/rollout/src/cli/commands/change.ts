// `rollout pause | resume | promote | abort`: a change to the running rollout's record (domain
// `command`), written compare-and-set; the rollout service's next tick carries it out.
import { command, withLog } from "../../domain/plan.ts";
import type { CliArgs } from "../args.ts";
import { type CliContext, show } from "../context.ts";

export type ChangeVerb = "pause" | "resume" | "promote" | "abort";

/** The handler of one change; refused (3) when there is no rollout or its state does not allow it. */
export function changeCommand(verb: ChangeVerb) {
  return async (ctx: CliContext, _a: CliArgs): Promise<number> => {
    for (let i = 0; i < 5; i++) {
      const cur = await ctx.store.read();
      if (!cur) {
        console.error(`rollout ${verb}: there is no rollout`);
        return 3;
      }
      const r = command(cur.record, verb, Date.now(), ctx.by);
      if ("refused" in r) {
        console.error(`rollout ${verb}: refused: ${r.refused}`);
        return 3;
      }
      const next = withLog(r.next, { action: verb, why: r.next.reason ?? verb }, new Date());
      if ((await ctx.store.write(next, cur.revision)) === undefined) continue;
      await ctx.auditTo(`rollout.${verb}`, {
        id: next.id,
        state: next.state,
        region: next.plan.regions[next.region],
        step: next.plan.steps[next.step],
      });
      show(
        ctx,
        next,
        `${verb}: rollout ${next.id} is ${next.state}${next.applied ? "" : " (the rollout service moves the shards)"}`,
      );
      return 0;
    }
    throw new Error("the rollout record kept changing; try again");
  };
}
