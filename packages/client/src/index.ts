// @pipeline/client: a typed client of the pipeline's REST API, with no runtime dependency.
export { backoffMs, DEFAULT_RETRY, parseRetryAfter, type RetryPolicy, retryDelayMs } from "./backoff.ts";
export { type Client, type ClientOptions, createClient } from "./client.ts";
export { ApiError, FAILOVER_STATUSES, NetworkError, RETRYABLE_STATUSES } from "./errors.ts";
export { ClientOptionError } from "./options.ts";
export { homeRegionOfId } from "./regions.ts";
export {
  CALLBACK_HEADERS,
  type CallbackHeaders,
  type VerifyCallbackInput,
  type VerifyCallbackResult,
  verifyCallback,
} from "./signature.ts";
export type { ClientStats } from "./stats.ts";
export { FAILOVER_SETTLE_MS } from "./transport.ts";
export {
  type CallbackBody,
  FINAL_STATUSES,
  type GeetestParams,
  type ImageParams,
  type Priority,
  type Problem,
  parseCallbackBody,
  parseTaskView,
  type RecaptchaV2Params,
  type RecaptchaV3Params,
  ReplyShapeError,
  type ReportAccepted,
  TASK_STATUSES,
  TASK_TYPES,
  type TaskAccepted,
  type TaskRequest,
  type TaskStatus,
  type TaskType,
  type TaskView,
  type TurnstileParams,
} from "./types.ts";
