// The rollout record in NATS KV (`rollout_control`, key `current`, compare-and-set writes): the
// store and the operators' write path live in @pipeline/shared/rollout/store, shared with the
// operator console; named here for the service and the CLI.
export {
  type ChangeResult,
  CONTROL_BUCKET,
  CURRENT_KEY,
  changeRollout,
  createRolloutStore,
  openControlBucket,
  type RolloutStore,
  type Stored,
} from "@pipeline/shared/rollout/store";
