export { bindBucket, CONFIG_HISTORY, openConfigBucket, openRegionBucket } from "./buckets.ts";
export {
  type ConfigRevision,
  configHistory,
  InvalidConfigError,
  latestValidConfig,
  putSolverConfig,
  SOLVER_CONFIG_KEY,
} from "./config-history.ts";
export { HEARTBEAT_EVERY_MS, HEARTBEAT_TTL_MS, Heartbeat, liveWorkers, openWorkersBucket } from "./heartbeats.ts";
export { incarnationId, newIncarnation, workerNameOf } from "./incarnation.ts";
export {
  describeIssues,
  KEY_NAME,
  type Parsed,
  type ProviderKeys,
  ProviderKeysFile,
  parseProviderKeys,
  parseSolverConfig,
  SolverRuntimeConfig,
} from "./runtime-config.ts";
export { StaleViewError, type WorkersView, watchWorkers } from "./workers-view.ts";
