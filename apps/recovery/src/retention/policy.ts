import type { RecoveryConfig } from "../config.ts";
import type { RetentionPolicy } from "./retention.ts";

/** The retention policy of the configuration (TOKEN_GRACE_MS, TASK_RETENTION_DAYS, ROW_RETENTION_DAYS, RETENTION_BATCH). */
export function retentionPolicy(
  c: Pick<RecoveryConfig, "TOKEN_GRACE_MS" | "TASK_RETENTION_DAYS" | "ROW_RETENTION_DAYS" | "RETENTION_BATCH">,
): RetentionPolicy {
  return {
    tokenGraceMs: c.TOKEN_GRACE_MS,
    taskRetentionDays: c.TASK_RETENTION_DAYS,
    rowRetentionDays: c.ROW_RETENTION_DAYS,
    batch: c.RETENTION_BATCH,
  };
}
