/** How the caller asked to be answered: `json=1` and `header_acao=1`. */
export interface ReplyStyle {
  json: boolean;
  acao: boolean;
}

/** Reads the reply style from a call's params (`json=1`/`true`, `header_acao=1`/`true`). */
export function replyStyleOf(params: Readonly<Record<string, string>>): ReplyStyle {
  const on = (v: string | undefined) => v === "1" || v === "true";
  return { json: on(params.json), acao: on(params.header_acao) };
}

/**
 * One protocol answer, before it is rendered in the caller's style:
 * - `ok`: plain `OK|<value>[|plainExtra...]`, JSON `{"status":1,"request":"<value>",...extra}`
 *   (`extra` only in JSON, `plainExtra` only in plain: `get2` puts the price in both, differently);
 * - `bare`: a success without the `OK|` prefix (a balance, a bulk answer, `OK_REPORT_RECORDED`);
 * - `code`: an error or `CAPCHA_NOT_READY`, plain `CODE`, JSON `{"status":0,"request":"CODE"}`.
 */
export type ProtocolReply =
  | { kind: "ok"; value: string; extra?: Record<string, string>; plainExtra?: string[] }
  | { kind: "bare"; value: string }
  | { kind: "code"; code: string };

export const ok = (value: string, extra?: Record<string, string>, plainExtra?: string[]): ProtocolReply => ({
  kind: "ok",
  value,
  ...(extra && Object.keys(extra).length ? { extra } : {}),
  ...(plainExtra?.length ? { plainExtra } : {}),
});
export const bare = (value: string): ProtocolReply => ({ kind: "bare", value });
export const code = (c: string): ProtocolReply => ({ kind: "code", code: c });

export const PLAIN_CONTENT_TYPE = "text/plain; charset=utf-8";
export const JSON_CONTENT_TYPE = "application/json";

/** A rendered reply: the exact bytes and headers a provider would send (always HTTP 200 for protocol answers). */
export interface RenderedReply {
  body: string;
  headers: Record<string, string>;
}

/**
 * Renders a reply the way 2Captcha/CaptchaAI format it: plain text, or with `json=1` a JSON
 * object with `status` 1/0 and `request` as a string. `header_acao=1` adds
 * `Access-Control-Allow-Origin: *`.
 */
export function renderReply(style: ReplyStyle, reply: ProtocolReply): RenderedReply {
  const headers: Record<string, string> = {
    "content-type": style.json ? JSON_CONTENT_TYPE : PLAIN_CONTENT_TYPE,
    "cache-control": "no-store",
  };
  if (style.acao) headers["access-control-allow-origin"] = "*";
  switch (reply.kind) {
    case "ok":
      return {
        headers,
        body: style.json
          ? JSON.stringify({ status: 1, request: reply.value, ...reply.extra })
          : ["OK", reply.value, ...(reply.plainExtra ?? [])].join("|"),
      };
    case "bare":
      return { headers, body: style.json ? JSON.stringify({ status: 1, request: reply.value }) : reply.value };
    case "code":
      return { headers, body: style.json ? JSON.stringify({ status: 0, request: reply.code }) : reply.code };
  }
}
