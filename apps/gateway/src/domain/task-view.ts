// The view is a shared contract (the notifier sends it too); it lives in @pipeline/shared/tasks.
import { classifyError, isTemporaryBlock } from "@pipeline/shared/provider";
import { toTaskView as sharedTaskView } from "@pipeline/shared/tasks";

/**
 * Whether a failure code is the provider's word about our account (ERROR_ZERO_BALANCE, IP_BANNED,
 * ERROR_WRONG_USER_KEY, ERROR_KEY_DOES_NOT_EXIST, ERROR_IP_NOT_ALLOWED, the temporary blocks
 * `ERROR: 1001`…): a client would take it for its own, and it tells strangers about our provider
 * account (issue 14, low). Codes about the task (ERROR_PAGEURL…), the provider's load
 * (ERROR_NO_SLOT_AVAILABLE) and our own (DEADLINE_EXCEEDED…) are shown as they are.
 */
export function isProviderAccountCode(code: string): boolean {
  // Under the 2captcha profile ERROR_ZERO_BALANCE is "no funds": a key-stopping code too.
  return isTemporaryBlock(code) || classifyError(code, "2captcha") === "key_stops";
}

/**
 * The client's view of a task (REST, SSE, the facade): the shared view, with a failure the
 * provider's account caused shown as `PROVIDER_ERROR` and without the provider's message.
 */
export function toTaskView(...args: Parameters<typeof sharedTaskView>): ReturnType<typeof sharedTaskView> {
  const view = sharedTaskView(...args);
  if (view.error && isProviderAccountCode(view.error.code))
    view.error = { code: "PROVIDER_ERROR", message: "the provider could not take this task; submit it again later" };
  return view;
}
