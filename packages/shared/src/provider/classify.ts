/** How to react to a provider error code (docs/provider-protocol.md, "Error classes"). */
export type ErrorClass = "retry" | "resubmit" | "task_fails" | "key_stops";

/** Which provider we speak to: `ERROR_ZERO_BALANCE` means "no funds" at 2Captcha, "no free threads" at CaptchaAI. */
export type ProviderProfile = "2captcha" | "captchaai";

const RETRY = new Set([
  "ERROR_NO_SLOT_AVAILABLE",
  "ERROR_TOO_MUCH_REQUESTS",
  "MAX_USER_TURN",
  "ERROR_SERVER_ERROR",
  "ERROR_INTERNAL_SERVER_ERROR",
]);
const RESUBMIT = new Set(["ERROR_CAPTCHA_UNSOLVABLE", "ERROR_BAD_DUPLICATES", "ERROR_PROXY_CONNECTION_FAILED"]);
const TASK_FAILS = new Set([
  "ERROR_PAGEURL",
  "ERROR_GOOGLEKEY",
  "ERROR_WRONG_GOOGLEKEY",
  "ERROR_BAD_TOKEN_OR_PAGEURL",
  "ERROR_BAD_PARAMETERS",
  "ERROR_BAD_PROXY",
  "ERROR_ZERO_CAPTCHA_FILESIZE",
  "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
  "ERROR_WRONG_FILE_EXTENSION",
  "ERROR_IMAGE_TYPE_NOT_SUPPORTED",
  "ERROR_UPLOAD",
  "ERROR_CAPTCHAIMAGE_BLOCKED",
  "ERROR_TOKEN_EXPIRED",
  "ERROR_WRONG_ID_FORMAT",
  "ERROR_WRONG_CAPTCHA_ID",
  "ERROR_EMPTY_ACTION",
]);
const KEY_STOPS = new Set(["ERROR_WRONG_USER_KEY", "ERROR_KEY_DOES_NOT_EXIST", "IP_BANNED", "ERROR_IP_NOT_ALLOWED"]);

/** Temporary account blocks `ERROR: 1001`..`1005`: retry after a long pause. */
export const isTemporaryBlock = (code: string) => /^ERROR: 100[1-5]$/.test(code);

/**
 * Classifies a provider error code. Unknown codes are retried (bounded by the task's deadline
 * and attempts): the protocol says anything unrecognised means "wait and retry".
 */
export function classifyError(code: string, profile: ProviderProfile): ErrorClass {
  if (code === "ERROR_ZERO_BALANCE") return profile === "2captcha" ? "key_stops" : "retry";
  if (RETRY.has(code) || isTemporaryBlock(code)) return "retry";
  if (RESUBMIT.has(code)) return "resubmit";
  if (TASK_FAILS.has(code)) return "task_fails";
  if (KEY_STOPS.has(code)) return "key_stops";
  return "retry";
}
