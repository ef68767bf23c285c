// The five drill faults, one file each, by scenario name.
import type { Scenario } from "../scenarios.ts";
import { configCorruption } from "./config-corruption.ts";
import { dbLoss } from "./db-loss.ts";
import type { Fault, FaultDeps } from "./fault.ts";
import { keyCompromise } from "./key-compromise.ts";
import { queueLoss } from "./queue-loss.ts";
import { workerCrash } from "./worker-crash.ts";

export { DrillError, type Fault, type FaultDeps } from "./fault.ts";

const FAULTS: { [S in Scenario]: (d: FaultDeps) => Fault } = {
  "worker-crash": workerCrash,
  "queue-loss": queueLoss,
  "db-loss": dbLoss,
  "key-compromise": keyCompromise,
  "config-corruption": configCorruption,
};

/** The fault of `scenario`, bound to its dependencies. */
export function faultFor(scenario: Scenario, d: FaultDeps): Fault {
  return FAULTS[scenario](d);
}
