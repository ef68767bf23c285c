import { createHash, randomBytes } from "node:crypto";

/** The user agent a turnstile answer reports in JSON mode (as 2Captcha's workers do). */
export const TURNSTILE_USER_AGENT =
  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";

function randomPart(bytes: number): string {
  return randomBytes(bytes).toString("base64url");
}

/**
 * A reCAPTCHA token unique to this provider task: `03AGdBq2-EMU-TOKEN-<id>-<random>`.
 * Only `[A-Za-z0-9_-]` after the prefix, so it survives `|`-joined bulk replies.
 */
export function recaptchaToken(providerId: string): string {
  return `03AGdBq2-EMU-TOKEN-${providerId}-${randomPart(36)}`;
}

/** A Turnstile token unique to this provider task: `0.EMU-TOKEN-<id>-<random>`. */
export function turnstileToken(providerId: string): string {
  return `0.EMU-TOKEN-${providerId}-${randomPart(36)}`;
}

/**
 * A GeeTest v3 answer as 2Captcha returns it: a JSON string with geetest_challenge (the
 * challenge sent), geetest_validate and geetest_seccode (`<validate>|jordan`).
 */
export function geetestAnswer(providerId: string, challenge: string): string {
  const validate = createHash("md5")
    .update(`${providerId}:${challenge}:${randomPart(8)}`)
    .digest("hex");
  return JSON.stringify({
    geetest_challenge: challenge,
    geetest_validate: validate,
    geetest_seccode: `${validate}|jordan`,
  });
}

const DIGITS = "0123456789";
const LETTERS = "abcdefghijklmnopqrstuvwxyz";

/**
 * The text a worker would type for an image: derived from the image's sha256, so the same
 * image always gets the same answer. Honours `numeric` (1 digits, 2 letters) and
 * `min_len`/`max_len` (default length 6).
 */
export function imageAnswer(image: Uint8Array, params: Record<string, string>): string {
  const alphabet = params.numeric === "1" ? DIGITS : params.numeric === "2" ? LETTERS : DIGITS + LETTERS;
  const min = Number.parseInt(params.min_len ?? "", 10);
  const max = Number.parseInt(params.max_len ?? "", 10);
  let length = 6;
  if (Number.isFinite(min) && min > 0) length = Math.max(length, min);
  if (Number.isFinite(max) && max > 0) length = Math.min(length, max);
  length = Math.max(1, Math.min(length, 32));
  const digest = createHash("sha256").update(image).digest();
  let out = "";
  for (let i = 0; i < length; i++) out += alphabet[digest[i]! % alphabet.length];
  return out;
}
