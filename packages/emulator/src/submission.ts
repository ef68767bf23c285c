import type { EmulatorMethod } from "./settings.ts";

/** A submission that passed validation: what to solve and how to fingerprint it. */
export interface ValidSubmission {
  ok: true;
  method: EmulatorMethod;
  /** The in.php `method` value as sent (`userrecaptcha`, `post`, `base64`, ...). */
  protocolMethod: string;
  /** Params used for the fingerprint; a multipart file appears as base64 under `file`. */
  fingerprintParams: Record<string, string>;
  /** Decoded image bytes for image tasks. */
  image?: Uint8Array;
}

/** A submission refused with a protocol error code. */
export interface RejectedSubmission {
  ok: false;
  code: string;
}

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

function present(v: string | undefined): v is string {
  return v !== undefined && v.trim() !== "";
}

function checkImage(bytes: Uint8Array, maxBytes: number): RejectedSubmission | null {
  if (bytes.byteLength === 0) return { ok: false, code: "ERROR_ZERO_CAPTCHA_FILESIZE" };
  if (bytes.byteLength > maxBytes) return { ok: false, code: "ERROR_TOO_BIG_CAPTCHA_FILESIZE" };
  return null;
}

/**
 * Checks an in.php call's task params the way 2Captcha does and names the task kind.
 * Missing googlekey/sitekey -> ERROR_GOOGLEKEY, missing pageurl -> ERROR_PAGEURL, missing
 * gt/challenge or an unknown method -> ERROR_BAD_PARAMETERS, empty image ->
 * ERROR_ZERO_CAPTCHA_FILESIZE, image over `maxImageBytes` decoded -> ERROR_TOO_BIG_CAPTCHA_FILESIZE.
 */
export function validateSubmission(
  params: Record<string, string>,
  file: Uint8Array | undefined,
  maxImageBytes: number,
): ValidSubmission | RejectedSubmission {
  const protocolMethod = params.method ?? "";
  const fp = { ...params };
  switch (protocolMethod) {
    case "userrecaptcha": {
      if (!present(params.googlekey)) return { ok: false, code: "ERROR_GOOGLEKEY" };
      if (!present(params.pageurl)) return { ok: false, code: "ERROR_PAGEURL" };
      const v3 = params.version === "v3";
      if (v3 && params.min_score !== undefined) {
        const score = Number(params.min_score);
        if (!Number.isFinite(score) || score < 0 || score > 1) return { ok: false, code: "ERROR_BAD_PARAMETERS" };
      }
      return { ok: true, method: v3 ? "userrecaptcha_v3" : "userrecaptcha", protocolMethod, fingerprintParams: fp };
    }
    case "turnstile": {
      if (!present(params.sitekey)) return { ok: false, code: "ERROR_GOOGLEKEY" };
      if (!present(params.pageurl)) return { ok: false, code: "ERROR_PAGEURL" };
      return { ok: true, method: "turnstile", protocolMethod, fingerprintParams: fp };
    }
    case "geetest": {
      if (!present(params.gt) || !present(params.challenge)) return { ok: false, code: "ERROR_BAD_PARAMETERS" };
      if (!present(params.pageurl)) return { ok: false, code: "ERROR_PAGEURL" };
      return { ok: true, method: "geetest", protocolMethod, fingerprintParams: fp };
    }
    case "post": {
      const bytes = file ?? new Uint8Array(0);
      const bad = checkImage(bytes, maxImageBytes);
      if (bad) return bad;
      fp.file = Buffer.from(bytes).toString("base64");
      return { ok: true, method: "image", protocolMethod, fingerprintParams: fp, image: bytes };
    }
    case "base64": {
      const text = (params.body ?? "").replace(/\s+/g, "");
      if (!BASE64.test(text)) return { ok: false, code: "ERROR_UPLOAD" };
      const bytes = new Uint8Array(Buffer.from(text, "base64"));
      const bad = checkImage(bytes, maxImageBytes);
      if (bad) return bad;
      return { ok: true, method: "image", protocolMethod, fingerprintParams: fp, image: bytes };
    }
    default:
      return { ok: false, code: "ERROR_BAD_PARAMETERS" };
  }
}
