// `rollout pause | resume | promote [--full] | abort`: a change to the running rollout's record
// (the shared `command`, through `changeRollout`: compare-and-set, retried, audited; the operator
// console writes through the same function); the rollout service's next tick carries it out.
import { changeRollout } from "../../adapters/store.ts";
import type { CommandVerb } from "../../domain/plan.ts";
import { type CliArgs, USAGE } from "../args.ts";
import { type CliContext, show } from "../context.ts";

export type ChangeVerb = CommandVerb;

/** The handler of one change; refused (3) when there is no rollout or its state does not allow it. */
export function changeCommand(verb: ChangeVerb) {
  return async (ctx: CliContext, a: CliArgs): Promise<number> => {
    const full = verb === "promote" && a.rest.includes("--full");
    const extra = a.rest.filter((x) => !(full && x === "--full"));
    if (extra.length) {
      console.error(`rollout ${verb}: unexpected ${JSON.stringify(extra[0])}\n\n${USAGE}`);
      return 2;
    }
    const r = await changeRollout(ctx.store, { verb, by: ctx.by, full, audit: ctx.auditTo });
    if (!r.ok) {
      if (r.status === "busy") throw new Error(r.reason);
      console.error(`rollout ${verb}: ${r.status === "none" ? r.reason : `refused: ${r.reason}`}`);
      return 3;
    }
    const next = r.record;
    show(
      ctx,
      next,
      `${verb}: rollout ${next.id} is ${next.state}${next.applied ? "" : " (the rollout service moves the shards)"}`,
    );
    return 0;
  };
}
