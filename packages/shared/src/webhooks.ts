import { createHmac, timingSafeEqual } from "node:crypto";

/** Headers of a signed callback. */
export const WEBHOOK_HEADERS = {
  delivery: "x-pipeline-delivery",
  timestamp: "x-pipeline-timestamp",
  signature: "x-pipeline-signature",
} as const;

/**
 * The signing secret of one client: HMAC-SHA256(master, "callbacks:<client id>"). Each client gets
 * its own (it reads it with its API key: `GET /v1/webhook-secret`), so no client can sign a
 * callback another client's receiver accepts; the operator keeps one master (`WEBHOOK_SECRET`).
 */
export function clientWebhookSecret(master: string, clientId: string): string {
  return `whsec_${createHmac("sha256", master).update(`callbacks:${clientId}`).digest("base64url")}`;
}

/**
 * The signature header for one body: a `v1=` signature per live secret, comma-separated (two
 * during a rotation: the new master's and the previous one's), as Stripe-style receivers expect.
 */
export function signatureHeader(secrets: string[], timestamp: number, body: string): string {
  return secrets.map((s) => signWebhook(s, timestamp, body)).join(",");
}

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
  // One of the listed signatures (several during a rotation) must be ours.
  return headers.signature.split(",").some((sig) => {
    const got = Buffer.from(sig.trim());
    return want.length === got.length && timingSafeEqual(want, got);
  });
}
