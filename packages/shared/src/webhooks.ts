import { createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";

/** Headers of a signed callback. */
export const WEBHOOK_HEADERS = {
  delivery: "x-pipeline-delivery",
  timestamp: "x-pipeline-timestamp",
  signature: "x-pipeline-signature",
} as const;

/**
 * The signing secret of one client: HMAC-SHA256(master, "callbacks:<client id>"), and from its
 * generation 1 on "callbacks:<client id>:<generation>". Each client gets its own (it reads it with
 * its API key: `GET /v1/webhook-secret`), so no client can sign a callback another client's
 * receiver accepts; the operator keeps one master (`WEBHOOK_SECRET`) and rotates one client's
 * secret alone by raising that client's generation (`WEBHOOK_CLIENT_GENERATIONS`).
 */
export function clientWebhookSecret(master: string, clientId: string, generation = 0): string {
  const label = generation === 0 ? `callbacks:${clientId}` : `callbacks:${clientId}:${generation}`;
  return `whsec_${createHmac("sha256", master).update(label).digest("base64url")}`;
}

/**
 * `WEBHOOK_CLIENT_GENERATIONS` (gateway and solvers alike): per client id, the generation of its
 * callback secret, and the previous generation that still signs while its receiver moves over.
 * A client not listed is at generation 0.
 */
export const WebhookGenerations = z.record(
  z.string().regex(/^[0-9a-f]{16,64}$/, "a client id (hex, GET /v1/usage)"),
  z
    .object({
      current: z.number().int().min(0).max(1_000_000),
      previous: z.number().int().min(0).max(1_000_000).optional(),
    })
    .strict()
    .refine((g) => g.previous === undefined || g.previous !== g.current, {
      message: "previous must differ from current",
      path: ["previous"],
    }),
);
export type WebhookGenerations = z.infer<typeof WebhookGenerations>;

/**
 * Every secret a callback of `clientId` is signed with, the current one first: the current
 * master at the client's current generation, then (during a rotation) its previous generation
 * and the previous master at the current generation. A receiver holding any of them verifies it.
 */
export function clientSigningSecrets(
  masters: readonly string[],
  clientId: string,
  generations: WebhookGenerations = {},
): string[] {
  const g = generations[clientId] ?? { current: 0 };
  const [current, ...older] = masters;
  if (current === undefined) return [];
  const out = [clientWebhookSecret(current, clientId, g.current)];
  if (g.previous !== undefined) out.push(clientWebhookSecret(current, clientId, g.previous));
  for (const m of older) out.push(clientWebhookSecret(m, clientId, g.current));
  return [...new Set(out)];
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
export function verifyWebhook(
  secret: string,
  headers: { timestamp: string | null; signature: string | null },
  body: string,
  nowSec = Math.floor(Date.now() / 1000),
  toleranceSec = 300,
): boolean {
  const ts = Number(headers.timestamp);
  if (!Number.isInteger(ts) || Math.abs(nowSec - ts) > toleranceSec || !headers.signature) return false;
  const want = Buffer.from(signWebhook(secret, ts, body));
  // One of the listed signatures (several during a rotation) must be ours.
  return headers.signature.split(",").some((sig) => {
    const got = Buffer.from(sig.trim());
    return want.length === got.length && timingSafeEqual(want, got);
  });
}
