// What the provider's answer to a report means for it: recorded, refused for good, or try again.
import type { ProviderReply } from "@pipeline/shared/provider";

export type ReportOutcome =
  | { kind: "recorded"; reply: string }
  | { kind: "refused"; reply: string }
  | { kind: "retry"; reply: string; delayMs: number };

/** Codes after which a report is never sent again: too late or too many, or a provider task it does not know. */
const REFUSED = new Set(["ERROR_REPORT_NOT_RECORDED", "ERROR_WRONG_CAPTCHA_ID", "ERROR_WRONG_ID_FORMAT"]);

/**
 * The outcome of one `reportbad`/`reportgood` call. OK_REPORT_RECORDED (plain, or JSON status 1)
 * and ERROR_DUPLICATE_REPORT (a report of ours that landed before, its reply lost) are recorded;
 * the provider's refusals are final; anything else (transport, key errors, 5xx, rate limits) is
 * tried again after an exponential backoff, until `maxAttempts` calls were made.
 */
export function reportOutcome(
  reply: ProviderReply,
  attempts: number,
  o: { maxAttempts: number; baseMs: number; maxMs: number },
): ReportOutcome {
  const text =
    reply.kind === "ok"
      ? reply.value
      : reply.kind === "error"
        ? reply.code
        : reply.kind === "transport"
          ? reply.reason
          : "CAPCHA_NOT_READY";
  if (text === "OK_REPORT_RECORDED" || text === "ERROR_DUPLICATE_REPORT") return { kind: "recorded", reply: text };
  if (reply.kind === "error" && REFUSED.has(reply.code)) return { kind: "refused", reply: text };
  if (attempts >= o.maxAttempts) return { kind: "refused", reply: `gave up after ${attempts} attempts: ${text}` };
  return { kind: "retry", reply: text, delayMs: Math.min(o.maxMs, o.baseMs * 2 ** Math.max(0, attempts - 1)) };
}
