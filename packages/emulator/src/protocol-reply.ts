/** How the caller asked to be answered: `json=1` and `header_acao=1`. */
export interface ReplyStyle {
  json: boolean;
  acao: boolean;
}

/** Reads the reply style from a call's params. */
export function replyStyleOf(params: Record<string, string>): ReplyStyle {
  return { json: params.json === "1" || params.json === "true", acao: params.header_acao === "1" };
}

function headers(style: ReplyStyle, contentType: string): Record<string, string> {
  const h: Record<string, string> = { "content-type": contentType, "cache-control": "no-store" };
  if (style.acao) h["access-control-allow-origin"] = "*";
  return h;
}

const PLAIN = "text/plain; charset=utf-8";
const JSON_TYPE = "application/json";

/**
 * A success reply: plain `OK|<value>` or JSON `{"status":1,"request":"<value>", ...extra}`.
 * Extra fields (e.g. `useragent`, `price`) only appear in JSON mode.
 */
export function okReply(style: ReplyStyle, value: string, extra: Record<string, string> = {}): Response {
  if (style.json) {
    return new Response(JSON.stringify({ status: 1, request: value, ...extra }), {
      headers: headers(style, JSON_TYPE),
    });
  }
  return new Response(`OK|${value}`, { headers: headers(style, PLAIN) });
}

/**
 * A reply whose plain form carries no `OK|` prefix: a balance, a bulk answer, or a bare code
 * such as `OK_REPORT_RECORDED`. JSON mode: `{"status":<status>,"request":"<value>"}`.
 */
export function bareReply(style: ReplyStyle, value: string, status: 0 | 1): Response {
  if (style.json) {
    return new Response(JSON.stringify({ status, request: value }), { headers: headers(style, JSON_TYPE) });
  }
  return new Response(value, { headers: headers(style, PLAIN) });
}

/** An error or `CAPCHA_NOT_READY`: plain `CODE` or `{"status":0,"request":"CODE"}`. HTTP 200, as providers do. */
export function codeReply(style: ReplyStyle, code: string): Response {
  return bareReply(style, code, 0);
}

const STATUS_TEXT: Record<number, string> = {
  500: "500 Internal Server Error",
  502: "502 Bad Gateway",
  503: "503 Service Temporarily Unavailable",
};

/** The nginx-style HTML error page a provider's front end serves when it is in trouble. */
export function htmlErrorPage(status: 500 | 502 | 503): Response {
  const title = STATUS_TEXT[status] ?? String(status);
  const body = `<html>\r\n<head><title>${title}</title></head>\r\n<body>\r\n<center><h1>${title}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n`;
  return new Response(body, { status, headers: { "content-type": "text/html" } });
}
