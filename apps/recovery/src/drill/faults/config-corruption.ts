// config-corruption: a non-JSON revision written straight into the bucket; solvers must refuse it,
// then the runbook rolls back to the last good revision (or purges when there is none).
import { latestValidConfig, SOLVER_CONFIG_KEY } from "@pipeline/shared/kv";
import { awaitConvergence, rollbackConfig } from "../../fleet/config-ops.ts";
import { configDeps, DrillError, type Fault, type FaultDeps } from "./fault.ts";

/** Fails when any solver applies the corrupt revision. */
export function configCorruption(d: FaultDeps): Fault {
  return {
    async prepare() {},
    async inject() {
      // A bad write straight into the bucket (as a broken script would do): not JSON at all.
      const revision = await d.configKv.put(SOLVER_CONFIG_KEY, "{ providerKey: oops, pollIntervalMs: -1");
      d.step(`corrupt config written as revision ${revision}`);
      const seen = await awaitConvergence(d.workersKv, revision, 10_000);
      d.step(
        `solvers: ${seen.refused.length} refused it, ${seen.applied.length} applied it, ${seen.pending.length} silent (${seen.ms} ms)`,
      );
      if (seen.applied.length) throw new DrillError(`solvers applied a corrupt config: ${seen.applied.join(", ")}`);
      if (!(await latestValidConfig(d.configKv))) {
        await d.configKv.purge(SOLVER_CONFIG_KEY);
        d.step(
          "no valid revision to roll back to: the corrupt one is purged; the solvers keep their environment's config",
        );
        return { corruptRevision: revision, refusedBy: seen.refused.map((r) => r.workerId), rolledBackTo: null };
      }
      const rb = await rollbackConfig(configDeps(d), undefined, "drill: config corruption");
      const after = await awaitConvergence(d.workersKv, rb.revision, 10_000);
      d.step(
        `config rollback: revision ${rb.restored} restored as ${rb.revision}, applied by ${after.applied.length}/${after.workers.length}`,
      );
      return {
        corruptRevision: revision,
        refusedBy: seen.refused.map((r) => r.workerId),
        rolledBackTo: rb.restored,
        revision: rb.revision,
      };
    },
  };
}
