import { type TaskRequest, taskRequest } from "@pipeline/shared/schemas";
import { z } from "zod";

/** What an in.php call amounts to: a valid task, or the protocol error code to answer. */
export type Submission = { ok: true; task: TaskRequest } | { ok: false; code: string };

/**
 * Our code for `pingback` (not a 2Captcha code): the facade sends no callbacks. The pipeline's
 * `callbackUrl` posts a signed JSON view, not 2Captcha's `id`/`code` form, so it cannot stand in.
 */
export const PINGBACK_NOT_SUPPORTED = "ERROR_PINGBACK_NOT_SUPPORTED";
/** Our code for `proxy`: tasks cannot carry a proxy, and solving without it would change the answer (not a 2Captcha code). */
export const PROXY_NOT_SUPPORTED = "ERROR_PROXY_NOT_SUPPORTED";

// Protocol flags are 0/1 (the official JS client sends numbers, which arrive as "0"/"1"); 0 means
// "not set", so it is dropped rather than stored as false.
const Flag = z.enum(["0", "1", "true", "false"]).transform((v) => (v === "1" || v === "true" ? true : undefined));
const Int = z
  .string()
  .regex(/^\s*\d{1,3}\s*$/)
  .transform((v) => Number(v));
// min_len/max_len 0 means "no limit" in the protocol; our schema leaves the field out instead.
const Len = Int.transform((n) => (n === 0 ? undefined : n));
const Score = z
  .string()
  .regex(/^\s*\d(\.\d+)?\s*$/)
  .transform((v) => Number(v));
const Text = z.string();

const RecaptchaIn = z.object({ googlekey: Text.optional(), pageurl: Text.optional(), enterprise: Flag.optional() });
const RecaptchaV2In = RecaptchaIn.extend({ invisible: Flag.optional(), "data-s": Text.optional() }).transform((p) => ({
  type: "recaptcha_v2" as const,
  params: {
    sitekey: p.googlekey,
    pageurl: p.pageurl,
    invisible: p.invisible,
    enterprise: p.enterprise,
    data_s: p["data-s"],
  },
}));
const RecaptchaV3In = RecaptchaIn.extend({ action: Text.optional(), min_score: Score.optional() }).transform((p) => ({
  type: "recaptcha_v3" as const,
  params: {
    sitekey: p.googlekey,
    pageurl: p.pageurl,
    action: p.action,
    min_score: p.min_score,
    enterprise: p.enterprise,
  },
}));
const TurnstileIn = z
  .object({ sitekey: Text.optional(), pageurl: Text.optional(), action: Text.optional(), data: Text.optional() })
  .transform((p) => ({
    type: "turnstile" as const,
    params: { sitekey: p.sitekey, pageurl: p.pageurl, action: p.action, cdata: p.data },
  }));
const GeetestIn = z
  .object({ gt: Text.optional(), challenge: Text.optional(), pageurl: Text.optional(), api_server: Text.optional() })
  .transform((p) => ({
    type: "geetest" as const,
    params: { gt: p.gt, challenge: p.challenge, pageurl: p.pageurl, api_server: p.api_server },
  }));
const ImageHintsIn = z.object({
  phrase: Flag.optional(),
  regsense: Flag.optional(),
  numeric: Int.optional(),
  calc: Flag.optional(),
  min_len: Len.optional(),
  max_len: Len.optional(),
  language: Int.optional(),
  lang: Text.optional(),
  textinstructions: Text.optional(),
});
const imageIn = (body: string) =>
  ImageHintsIn.transform((p) => ({
    type: "image" as const,
    params: {
      body,
      phrase: p.phrase,
      case_sensitive: p.regsense,
      numeric: p.numeric,
      calc: p.calc,
      min_len: p.min_len,
      max_len: p.max_len,
      language: p.language,
      lang: p.lang,
      textinstructions: p.textinstructions,
    },
  }));

const STANDARD_BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Checks image bytes the way providers do: empty, then too big. */
function imageSizeError(bytes: number, maxBytes: number): string | undefined {
  if (bytes === 0) return "ERROR_ZERO_CAPTCHA_FILESIZE";
  if (bytes > maxBytes) return "ERROR_TOO_BIG_CAPTCHA_FILESIZE";
  return undefined;
}

/** The image of a `post` (multipart `file`) or `base64` (`body`) call, as base64, or its error code. */
function imageBody(
  method: "post" | "base64",
  params: Readonly<Record<string, string>>,
  file: Uint8Array | undefined,
  maxBytes: number,
): { body: string } | { code: string } {
  if (method === "post") {
    const bytes = file ?? new Uint8Array(0);
    const bad = imageSizeError(bytes.byteLength, maxBytes);
    return bad ? { code: bad } : { body: Buffer.from(bytes).toString("base64") };
  }
  // base64 is often line-wrapped; providers ignore the whitespace
  const text = (params.body ?? "").replace(/\s+/g, "");
  if (text === "") return { code: "ERROR_ZERO_CAPTCHA_FILESIZE" };
  if (!STANDARD_BASE64.test(text) || text.length % 4 === 1) return { code: "ERROR_UPLOAD" };
  const bad = imageSizeError(Buffer.from(text, "base64").byteLength, maxBytes);
  return bad ? { code: bad } : { body: text };
}

function withoutUndefined<T extends Record<string, unknown>>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/** The protocol code for one field our task schema refused, with its rank: providers check the site key, the GeeTest keys, then the page URL. */
function codeForIssue(
  issue: z.core.$ZodIssue,
  raw: Readonly<Record<string, string>>,
  siteKeyParam: string,
): [rank: number, code: string] {
  const field = issue.path[0] === "params" ? String(issue.path[1]) : "";
  switch (field) {
    case "sitekey":
      return [0, raw[siteKeyParam] === undefined ? "ERROR_GOOGLEKEY" : "ERROR_WRONG_GOOGLEKEY"];
    case "gt":
    case "challenge":
      return [1, "ERROR_BAD_PARAMETERS"];
    case "pageurl":
      return [2, "ERROR_PAGEURL"];
    case "body":
      return [3, "ERROR_UPLOAD"];
    default:
      return [4, "ERROR_BAD_PARAMETERS"];
  }
}

/**
 * Maps the params of an in.php call onto a TaskRequest, the reverse of `toProviderParams`, and
 * validates it with the same schema as `POST /v1/tasks`. Empty values count as absent. Params we
 * do not know are ignored, as providers do (`key`, `json`, `soft_id`, `header_acao` among them);
 * `pingback` and `proxy`, which we cannot honour, are refused rather than silently dropped.
 * A refused call gets the code a provider would answer: ERROR_GOOGLEKEY (site key missing),
 * ERROR_WRONG_GOOGLEKEY (malformed), ERROR_PAGEURL, ERROR_BAD_PARAMETERS (unknown method, GeeTest
 * keys, any other field), ERROR_ZERO_CAPTCHA_FILESIZE, ERROR_TOO_BIG_CAPTCHA_FILESIZE (over
 * `imageMaxBytes` decoded), ERROR_UPLOAD (not base64).
 */
export function parseSubmission(
  rawParams: Readonly<Record<string, string>>,
  file: Uint8Array | undefined,
  opts: { imageMaxBytes: number },
): Submission {
  const raw = Object.fromEntries(Object.entries(rawParams).filter(([, v]) => v.trim() !== ""));
  if (raw.pingback !== undefined) return { ok: false, code: PINGBACK_NOT_SUPPORTED };
  if (raw.proxy !== undefined) return { ok: false, code: PROXY_NOT_SUPPORTED };

  let mapping: z.ZodType<{ type: TaskRequest["type"]; params: Record<string, unknown> }>;
  let siteKeyParam = "googlekey";
  switch (raw.method) {
    case "userrecaptcha":
      if (raw.version !== undefined && raw.version !== "v2" && raw.version !== "v3")
        return { ok: false, code: "ERROR_BAD_PARAMETERS" };
      mapping = raw.version === "v3" ? RecaptchaV3In : RecaptchaV2In;
      break;
    case "turnstile":
      mapping = TurnstileIn;
      siteKeyParam = "sitekey";
      break;
    case "geetest":
      mapping = GeetestIn;
      break;
    case "post":
    case "base64": {
      const image = imageBody(raw.method, raw, file, opts.imageMaxBytes);
      if ("code" in image) return { ok: false, code: image.code };
      mapping = imageIn(image.body);
      break;
    }
    default:
      return { ok: false, code: "ERROR_BAD_PARAMETERS" };
  }
  const candidate = mapping.safeParse(raw);
  if (!candidate.success) return { ok: false, code: "ERROR_BAD_PARAMETERS" };
  const parsed = taskRequest({ imageMaxBytes: opts.imageMaxBytes }).safeParse({
    type: candidate.data.type,
    params: withoutUndefined(candidate.data.params),
  });
  if (!parsed.success) {
    const [, code] = parsed.error.issues
      .map((i) => codeForIssue(i, raw, siteKeyParam))
      .sort((a, b) => a[0] - b[0])[0] ?? [4, "ERROR_BAD_PARAMETERS"];
    return { ok: false, code };
  }
  return { ok: true, task: parsed.data };
}

/**
 * The protocol code for a submission the pipeline did not accept. `queue_unavailable` (JetStream
 * did not take it, nothing was left behind) and `id_collision` are ERROR_NO_SLOT_AVAILABLE, which
 * every client treats as "try again"; a reused Idempotency-Key cannot happen through in.php.
 */
export function submitFailureCode(
  reason: "idempotency_mismatch" | "id_collision" | "queue_unavailable" | "quota",
): string {
  return reason === "idempotency_mismatch" ? "ERROR_BAD_PARAMETERS" : "ERROR_NO_SLOT_AVAILABLE";
}
