import { createHmac, timingSafeEqual } from "node:crypto";

/** Headers of a signed callback. */
export const WEBHOOK_HEADERS = {
  delivery: "x-pipeline-delivery",
  timestamp: "x-pipeline-timestamp",
  signature: "x-pipeline-signature",
} as const;

/** `v1=<hex HMAC-SHA256(secret, "<unix seconds>.<body>")>`, as Stripe-style receivers expect. */
export function signWebhook(secret: string, timestamp: number, body: string): string {
  return `v1=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`;
}

/**
 * Checks a callback's signature and its age (replays older than `toleranceSec` are refused).
 * For receivers; the pipeline's own tests use it too.
 */
export function verifyWebhook(secret: string, headers: { timestamp: string | null; signature: string | null }, body: string, nowSec = Math.floor(Date.now() / 1000), toleranceSec = 300): boolean {
  const ts = Number(headers.timestamp);
  if (!Number.isInteger(ts) || Math.abs(nowSec - ts) > toleranceSec || !headers.signature) return false;
  const want = Buffer.from(signWebhook(secret, ts, body));
  const got = Buffer.from(headers.signature);
  return want.length === got.length && timingSafeEqual(want, got);
}
