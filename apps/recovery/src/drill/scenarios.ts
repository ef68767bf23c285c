/** The runbook's five scenarios, each a `drill`. */
export const SCENARIOS = ["worker-crash", "queue-loss", "db-loss", "key-compromise", "config-corruption"] as const;
export type Scenario = (typeof SCENARIOS)[number];

/**
 * Catch-up targets (ms): every task acknowledged before the fault must be finished this long
 * after it (the runbook's figures). worker-crash: the 10 s a dead solver's tasks may wait with the
 * default settings (its peers declare it dead after DEAD_AFTER_MS and take its tasks over).
 */
export const CATCH_UP_TARGET_MS: Record<Scenario, number> = {
  "worker-crash": 10_000,
  "config-corruption": 10_000,
  "key-compromise": 30_000,
  "queue-loss": 60_000,
  "db-loss": 120_000,
};

/** RTO targets (ms) a drill is held to; RPO must be 0 in every scenario. */
export const RTO_TARGET_MS: Record<Scenario, number> = {
  "worker-crash": 10_000,
  "config-corruption": 10_000,
  "key-compromise": 30_000,
  "queue-loss": 60_000,
  "db-loss": 120_000,
};
