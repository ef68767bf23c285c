import { classifyError } from "@pipeline/shared/provider";
import type { TaskView } from "@pipeline/shared/schemas";
import { bare, code, ok, type ProtocolReply } from "./reply.ts";

/** The price `get2` reports. The gateway does not know what the provider charged; it reports 0. */
export const FACADE_PRICE = "0";

/** A task's answer in protocol terms: the token, or the code a provider would answer instead. */
export type TaskAnswer = { kind: "answer"; value: string; useragent?: string } | { kind: "code"; code: string };

// Failure codes that describe the provider's side of the exchange (its ids, its actions): to the
// client they would say something false about its own request.
const PROVIDER_SIDE = new Set(["ERROR_WRONG_ID_FORMAT", "ERROR_WRONG_CAPTCHA_ID", "ERROR_EMPTY_ACTION"]);

/**
 * The code a failed task answers: its own code when it is a protocol code about the task itself
 * (ERROR_CAPTCHA_UNSOLVABLE, ERROR_PAGEURL, ...), otherwise ERROR_CAPTCHA_UNSOLVABLE. Codes about
 * the pipeline's provider key or account (ERROR_WRONG_USER_KEY, ERROR_ZERO_BALANCE, ...) and our
 * own codes (DEADLINE_EXCEEDED, ...) never reach the client: it would take them for its own.
 */
export function failureCode(errorCode: string | undefined): string {
  if (!errorCode || !/^ERROR_[A-Z0-9_]+$/.test(errorCode) || PROVIDER_SIDE.has(errorCode))
    return "ERROR_CAPTCHA_UNSOLVABLE";
  const cls = classifyError(errorCode, "2captcha");
  return cls === "task_fails" || cls === "resubmit" ? errorCode : "ERROR_CAPTCHA_UNSOLVABLE";
}

/**
 * Maps what `GET /v1/tasks/:id` shows onto res.php: queued/solving/retrying -> CAPCHA_NOT_READY;
 * completed -> the token (plus the user agent for Turnstile); expired -> ERROR_TOKEN_EXPIRED;
 * failed -> `failureCode`; cancelled -> ERROR_CAPTCHA_UNSOLVABLE. The view already withholds a
 * token past its `expiresAt`, so an expired token is never handed out here either.
 */
export function answerOf(view: TaskView): TaskAnswer {
  switch (view.status) {
    case "queued":
    case "solving":
    case "retrying":
      return { kind: "code", code: "CAPCHA_NOT_READY" };
    case "completed":
      if (!view.result) return { kind: "code", code: "ERROR_CAPTCHA_UNSOLVABLE" };
      return view.type === "turnstile" && view.result.userAgent
        ? { kind: "answer", value: view.result.token, useragent: view.result.userAgent }
        : { kind: "answer", value: view.result.token };
    case "expired":
      return { kind: "code", code: "ERROR_TOKEN_EXPIRED" };
    case "failed":
      return { kind: "code", code: failureCode(view.error?.code) };
    case "cancelled":
      return { kind: "code", code: "ERROR_CAPTCHA_UNSOLVABLE" };
  }
}

/** `action=get` for one id: `OK|token` (JSON adds `useragent` for Turnstile), or the code. Unknown -> ERROR_WRONG_CAPTCHA_ID. */
export function getReply(view: TaskView | undefined): ProtocolReply {
  if (!view) return code("ERROR_WRONG_CAPTCHA_ID");
  const a = answerOf(view);
  if (a.kind === "code") return code(a.code);
  return ok(a.value, a.useragent ? { useragent: a.useragent } : undefined);
}

/** `action=get2`: plain `OK|token|price`, JSON `{"status":1,"request":"token","price":"0"}`. */
export function get2Reply(view: TaskView | undefined): ProtocolReply {
  if (!view) return code("ERROR_WRONG_CAPTCHA_ID");
  const a = answerOf(view);
  if (a.kind === "code") return code(a.code);
  return ok(a.value, { price: FACADE_PRICE, ...(a.useragent ? { useragent: a.useragent } : {}) }, [FACADE_PRICE]);
}

/**
 * Bulk `action=get&ids=a,b,c`: each task's token or code, `|`-joined in the order asked, without
 * the `OK|` prefix (JSON: status 1 with the joined string), as providers answer it.
 */
export function bulkGetReply(views: ReadonlyArray<TaskView | undefined>): ProtocolReply {
  return bare(
    views
      .map((v) => {
        if (!v) return "ERROR_WRONG_CAPTCHA_ID";
        const a = answerOf(v);
        return a.kind === "answer" ? a.value : a.code;
      })
      .join("|"),
  );
}
