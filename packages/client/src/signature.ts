// Verifying a task callback: the same scheme the pipeline signs with (x-pipeline-timestamp,
// x-pipeline-signature: `v1=<hex HMAC-SHA256(secret, "<unix seconds>.<body>")>`, several
// comma-separated during a secret rotation), reimplemented here so the client stands alone.
import { createHmac, timingSafeEqual } from "node:crypto";

export const CALLBACK_HEADERS = {
  delivery: "x-pipeline-delivery",
  timestamp: "x-pipeline-timestamp",
  signature: "x-pipeline-signature",
} as const;

export type CallbackHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyCallbackInput {
  /** The raw body exactly as received (verify before parsing it). */
  body: string | Uint8Array;
  headers: CallbackHeaders;
  /** The client's callback secret (`GET /v1/webhook-secret`, `whsec_…`); several during a rotation. */
  secret: string | readonly string[];
  /** Refuse callbacks signed longer ago (or further ahead) than this; default 300 s. */
  toleranceSec?: number;
  nowSec?: number;
}

export type VerifyCallbackResult =
  | { ok: true; deliveryId: string | undefined; timestamp: number }
  | { ok: false; reason: "missing_timestamp" | "bad_timestamp" | "too_old" | "missing_signature" | "bad_signature" };

function header(h: CallbackHeaders, name: string): string | undefined {
  if (h instanceof Headers) return h.get(name) ?? undefined;
  for (const [k, v] of Object.entries(h)) if (k.toLowerCase() === name) return Array.isArray(v) ? v[0] : v;
  return undefined;
}

/** Checks a callback's signature and age; says why when it refuses. Constant-time comparison. */
export function verifyCallback(input: VerifyCallbackInput): VerifyCallbackResult {
  const nowSec = input.nowSec ?? Math.floor(Date.now() / 1000);
  const tolerance = input.toleranceSec ?? 300;
  const tsText = header(input.headers, CALLBACK_HEADERS.timestamp);
  if (tsText === undefined) return { ok: false, reason: "missing_timestamp" };
  if (!/^\d{1,12}$/.test(tsText.trim())) return { ok: false, reason: "bad_timestamp" };
  const ts = Number(tsText.trim());
  if (Math.abs(nowSec - ts) > tolerance) return { ok: false, reason: "too_old" };
  const sigs = header(input.headers, CALLBACK_HEADERS.signature);
  if (!sigs) return { ok: false, reason: "missing_signature" };
  const body = typeof input.body === "string" ? Buffer.from(input.body) : Buffer.from(input.body);
  const secrets = typeof input.secret === "string" ? [input.secret] : input.secret;
  const wants = secrets.map((s) =>
    Buffer.from(`v1=${createHmac("sha256", s).update(`${ts}.`).update(body).digest("hex")}`),
  );
  const given = sigs.split(",").map((s) => Buffer.from(s.trim()));
  const match = given.some((got) => wants.some((want) => want.length === got.length && timingSafeEqual(want, got)));
  if (!match) return { ok: false, reason: "bad_signature" };
  return { ok: true, deliveryId: header(input.headers, CALLBACK_HEADERS.delivery), timestamp: ts };
}
