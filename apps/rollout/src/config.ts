import { commonEnv, envInt, natsAuthEnv, parseEnv } from "@pipeline/shared/config";
import { z } from "zod";

export const RolloutEnv = z.object({
  NATS_URL: commonEnv.NATS_URL,
  REGION: commonEnv.REGION,
  ...natsAuthEnv,
  /** AckWait of the lane consumers it reconciles (the solvers' ACK_WAIT_MS). */
  ACK_WAIT_MS: envInt(30_000, 1000, 3_600_000),
});
export type RolloutConfig = z.infer<typeof RolloutEnv>;

/** Parses the rollout environment; throws a ConfigError naming each variable at fault (never its value). */
export function loadConfig(env: Record<string, string | undefined>): RolloutConfig {
  return parseEnv(RolloutEnv, env);
}
