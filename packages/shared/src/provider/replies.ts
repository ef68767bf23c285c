import { z } from "zod";

/** What one provider HTTP exchange amounted to. */
export type ProviderReply =
  | { kind: "ok"; value: string; extra?: Record<string, unknown> }
  | { kind: "not_ready" }
  | { kind: "error"; code: string }
  | { kind: "transport"; reason: string };

const JsonReply = z
  .object({
    status: z.union([z.literal(0), z.literal(1), z.literal("0"), z.literal("1")]).transform(Number),
    request: z.union([z.string(), z.number()]).transform(String),
  })
  .loose();

const CODE = /^(ERROR_[A-Z0-9_]+|ERROR: ?\d{4}|MAX_USER_TURN|IP_BANNED|CAPC?HA_NOT_READY|OK_REPORT_RECORDED)$/;

/**
 * Parses an in.php/res.php reply (plain or json=1). Anything that is neither an answer nor a
 * known code (an HTML error page, a 5xx) is a `transport` reply: retry after a pause.
 */
export function parseProviderReply(httpStatus: number, body: string): ProviderReply {
  const text = body.trim();
  if (httpStatus >= 500) return { kind: "transport", reason: `HTTP ${httpStatus}` };
  let status: number | undefined;
  let request: string | undefined;
  let extra: Record<string, unknown> | undefined;
  if (text.startsWith("{")) {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return { kind: "transport", reason: "malformed JSON reply" };
    }
    const r = JsonReply.safeParse(json);
    if (!r.success) return { kind: "transport", reason: "JSON reply without status/request" };
    status = r.data.status;
    request = r.data.request;
    const { status: _s, request: _r, ...rest } = r.data;
    if (Object.keys(rest).length) extra = rest;
  } else if (text.startsWith("OK|")) {
    status = 1;
    request = text.slice(3);
  } else if (CODE.test(text)) {
    status = 0;
    request = text;
  } else {
    return { kind: "transport", reason: httpStatus >= 400 ? `HTTP ${httpStatus}` : "non-protocol body" };
  }
  if (request === "CAPCHA_NOT_READY" || request === "CAPTCHA_NOT_READY") return { kind: "not_ready" };
  if (status === 1) return extra ? { kind: "ok", value: request, extra } : { kind: "ok", value: request };
  if (CODE.test(request)) return { kind: "error", code: request.replace(/^ERROR: ?(\d+)$/, "ERROR: $1") };
  return { kind: "transport", reason: "non-protocol error body" };
}

/**
 * Splits the answer of a bulk `res.php?action=get&ids=a,b,c` (`|`-joined, in the order asked)
 * into one reply per id. Undefined when the count does not match (an answer that itself holds a
 * `|`, such as GeeTest's seccode): the caller then polls those ids one by one.
 */
export function splitBulkAnswer(value: string, count: number): ProviderReply[] | undefined {
  const parts = value.split("|");
  if (parts.length !== count) return undefined;
  return parts.map((p): ProviderReply => {
    const t = p.trim();
    if (t === "CAPCHA_NOT_READY" || t === "CAPTCHA_NOT_READY") return { kind: "not_ready" };
    if (CODE.test(t)) return { kind: "error", code: t.replace(/^ERROR: ?(\d+)$/, "ERROR: $1") };
    if (t === "") return { kind: "transport", reason: "empty part in a bulk answer" };
    return { kind: "ok", value: t };
  });
}
