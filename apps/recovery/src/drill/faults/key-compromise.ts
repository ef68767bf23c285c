// key-compromise: rotate every solver to the spare key (--to) and wait until all applied it.
import { rotateKey } from "../../fleet/config-ops.ts";
import { configDeps, DrillError, type Fault, type FaultDeps } from "./fault.ts";

/** Refuses without --to; fails when a solver refuses the new key or stays silent. */
export function keyCompromise(d: FaultDeps): Fault {
  return {
    async prepare() {
      if (!d.keyTo)
        throw new DrillError("key-compromise needs --to <key name>: the spare key the solvers' key file holds");
    },
    async inject() {
      const r = await rotateKey(configDeps(d), d.keyTo!, { reason: "drill: key compromised", waitMs: 20_000 });
      d.step(
        `rotate-key ${r.from ?? "?"} -> ${d.keyTo}: revision ${r.revision}, applied by ${r.applied.length}/${r.workers.length} solver(s) in ${r.ms} ms`,
      );
      if (r.refused.length || r.pending.length)
        throw new DrillError(
          `solvers did not switch: refused ${JSON.stringify(r.refused)}, silent ${JSON.stringify(r.pending)}`,
        );
      return {
        from: r.from,
        to: d.keyTo,
        revision: r.revision,
        convergedMs: r.ms,
        keyRefs: [...new Set(r.workers.map((w) => w.keyRef))],
      };
    },
  };
}
