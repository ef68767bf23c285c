import type { GatewayDeps } from "../../deps.ts";
import { code, ok } from "../../domain/twocaptcha/reply.ts";
import { parseSubmission, submitFailureCode } from "../../domain/twocaptcha/submission.ts";
import { SubmitError, submitTask } from "../../tasks/submit.ts";
import type { ProtocolAction } from "./protocol.ts";

/** `in.php`: a submission, through `submitTask` as `POST /v1/tasks` (without an idempotency key). */
export function inAction(deps: GatewayDeps): ProtocolAction {
  return async (call, clientId, c) => {
    const sub = parseSubmission(call.params, call.file, { imageMaxBytes: deps.config.IMAGE_MAX_BYTES });
    if (!sub.ok) return code(sub.code);
    // A fenced region (its lease lapsed or taken over) takes no new task: the protocol's "busy,
    // retry" code, which 2Captcha clients retry on; the other regions named as for REST.
    if (deps.fence && !deps.fence.allows()) {
      const others = (deps.config.regions ?? []).filter((r) => r !== deps.config.REGION);
      if (others.length) c.header("x-try-regions", others.join(","));
      return code("ERROR_NO_SLOT_AVAILABLE");
    }
    try {
      const accepted = await submitTask(deps, clientId, sub.task, undefined);
      return ok(accepted.id);
    } catch (err) {
      if (!(err instanceof SubmitError)) throw err;
      if (!err.refusal) return code(submitFailureCode(err.code));
      deps.metrics?.quotaRefused(err.refusal.kind);
      if (err.refusal.retryAfter !== undefined) c.header("retry-after", String(err.refusal.retryAfter));
      // The protocol's codes: no money left for today, or busy (clients retry).
      return code(err.refusal.kind === "dailySpend" ? "ERROR_ZERO_BALANCE" : "ERROR_NO_SLOT_AVAILABLE");
    }
  };
}
