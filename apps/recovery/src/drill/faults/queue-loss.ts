// queue-loss: delete TASKS, then rebuild-queue.
import { streams } from "@pipeline/shared/subjects";
import { rebuildQueue } from "../../queue/rebuild-queue.ts";
import type { Fault, FaultDeps } from "./fault.ts";

/** Deletes this region's TASKS stream (messages and consumers) and rebuilds it from Postgres. */
export function queueLoss(d: FaultDeps): Fault {
  return {
    async prepare() {},
    async inject() {
      const name = streams.tasks(d.ctx.region);
      await d.ctx.jsm.streams.delete(name);
      d.step(`${name} deleted (messages and consumers with it)`);
      const r = await rebuildQueue(d.ctx, { gatewayGraceMs: d.gatewayGraceMs });
      d.step(
        `rebuild-queue: ${r.open} unfinished task(s), ${r.republished} re-published, ${r.withMessage} already had a message (${r.ms} ms)`,
      );
      return { republished: r.republished, open: r.open, rebuildMs: r.ms };
    },
  };
}
