import { z } from "zod";

/** The params of one in.php/res.php call, merged from the query string and the body. */
export interface ProtocolCall {
  params: Record<string, string>;
  /** Bytes of a multipart `file` part, when one was sent. */
  file?: Uint8Array;
  /** The body could not be read as the content type it claimed; `params` then holds the query only. */
  malformed: boolean;
  /** The body was JSON: the official JS client posts images that way, always with json=1. */
  jsonBody: boolean;
}

// The official JS client posts numbers (json: 1, numeric: 1) in its JSON bodies; they arrive as strings.
const JsonBody = z.record(
  z.string(),
  z
    .union([z.string(), z.number(), z.boolean(), z.null()])
    .transform((v) => (v === null ? "" : typeof v === "boolean" ? (v ? "1" : "0") : String(v))),
);

/**
 * Reads an in.php/res.php call: the query string, then on POST the body (urlencoded, multipart
 * or JSON; body fields win over query fields, as providers do). Never throws: a body that does
 * not parse as its content type (or a JSON body that is not an object of scalars) is reported as
 * `malformed` and contributes nothing.
 */
export async function readProtocolCall(req: Request): Promise<ProtocolCall> {
  const params: Record<string, string> = {};
  for (const [k, v] of new URL(req.url).searchParams) params[k] = v;
  const type = (req.headers.get("content-type") ?? "").toLowerCase();
  const jsonBody = type.startsWith("application/json");
  const call: ProtocolCall = { params, malformed: false, jsonBody };
  if (req.method !== "POST") return call;
  try {
    if (jsonBody) {
      const body = JsonBody.safeParse(await req.json());
      if (!body.success) return { ...call, malformed: true };
      Object.assign(params, body.data);
    } else if (type.startsWith("multipart/form-data")) {
      const form = await req.formData();
      for (const [k, v] of form) {
        if (typeof v === "string") params[k] = v;
        else if (k === "file") call.file = new Uint8Array(await v.arrayBuffer());
      }
    } else {
      for (const [k, v] of new URLSearchParams(await req.text())) params[k] = v;
    }
  } catch {
    return { params: Object.fromEntries(new URL(req.url).searchParams), malformed: true, jsonBody };
  }
  return call;
}
