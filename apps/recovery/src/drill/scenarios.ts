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

/**
 * The scenarios that destroy live state (issue 14): they run only when asked with `--yes`
 * (`confirmed` for runDrill). The text says what is destroyed.
 */
export const DESTRUCTIVE: Partial<Record<Scenario, string>> = {
  "queue-loss": "deletes the live TASKS stream",
  "db-loss": "drops the live database",
};

/** Why a drill may not run unconfirmed (the message names `--yes`), or undefined when it may. */
export function unconfirmedDrill(scenario: Scenario, confirmed: boolean | undefined): string | undefined {
  const what = DESTRUCTIVE[scenario];
  return what && !confirmed ? `drill ${scenario} ${what}: run it on purpose with --yes` : undefined;
}
