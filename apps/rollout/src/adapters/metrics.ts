import { Counter, createRegistry, Gauge, metricsResponse } from "@pipeline/shared/metrics";
import type { RolloutStatus } from "../controller.ts";
import type { GateVerdict } from "../domain/plan.ts";
import { RolloutState } from "../domain/plan.ts";

/** The rollout service's metrics: shard share and processes per version and region, the record's state, gate verdicts. */
export function createRolloutMetrics(status: () => RolloutStatus) {
  const registry = createRegistry("rollout");
  new Gauge({
    name: "rollout_shard_share",
    help: "Shards of the region's TASKS each solver version pulls",
    labelNames: ["region", "version"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [region, r] of Object.entries(status().regions))
        for (const [version, n] of Object.entries(r.share)) this.set({ region, version }, n);
    },
  });
  new Gauge({
    name: "rollout_processes",
    help: "Solver processes per version and region (live heartbeats)",
    labelNames: ["region", "version"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [region, r] of Object.entries(status().regions))
        for (const [version, n] of Object.entries(r.processes)) this.set({ region, version }, n);
    },
  });
  new Gauge({
    name: "rollout_state",
    help: "1 for the current rollout's state (running, paused, promoted, rolledBack, aborted); all 0 when there is none",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      const cur = status().record?.state;
      for (const s of RolloutState.options) this.set({ state: s }, s === cur ? 1 : 0);
    },
  });
  const verdicts = new Counter({
    name: "rollout_gate_verdicts_total",
    help: "Gate readings by region and verdict (pass, fail, wait)",
    labelNames: ["region", "verdict"],
    registers: [registry],
  });
  return {
    verdict: (region: string, v: GateVerdict) =>
      verdicts.inc({ region, verdict: v.pass === true ? "pass" : v.pass === false ? "fail" : "wait" }),
    response: () => metricsResponse(registry),
  };
}
