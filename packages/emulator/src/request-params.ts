/** Parameters of one protocol call, merged from the query string and the body. */
export interface ProtocolParams {
  params: Record<string, string>;
  /** Bytes of a multipart `file` part, when one was sent. */
  file?: Uint8Array;
}

function stringify(v: unknown): string {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return String(v);
  if (v === null || v === undefined) return "";
  return JSON.stringify(v);
}

/**
 * Reads the params of an in.php/res.php call: query string, then the body (urlencoded,
 * multipart or JSON) on POST; body fields win. A malformed body counts as no body, as a
 * lenient provider would treat it; it never throws.
 */
export async function readProtocolParams(req: Request): Promise<ProtocolParams> {
  const out: ProtocolParams = { params: {} };
  for (const [k, v] of new URL(req.url).searchParams) out.params[k] = v;
  if (req.method !== "POST") return out;

  const type = (req.headers.get("content-type") ?? "").toLowerCase();
  try {
    if (type.includes("application/json")) {
      const body: unknown = await req.json();
      if (body && typeof body === "object" && !Array.isArray(body)) {
        for (const [k, v] of Object.entries(body)) out.params[k] = stringify(v);
      }
    } else if (type.includes("multipart/form-data")) {
      const form = await req.formData();
      for (const [k, v] of form) {
        if (typeof v === "string") out.params[k] = v;
        else if (k === "file") out.file = new Uint8Array(await v.arrayBuffer());
      }
    } else {
      for (const [k, v] of new URLSearchParams(await req.text())) out.params[k] = v;
    }
  } catch {
    // malformed body: keep the query params only
  }
  return out;
}
