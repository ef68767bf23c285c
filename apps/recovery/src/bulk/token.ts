// A preview's confirmation token: the action, the normalized filter, the count the operator saw,
// the region and an expiry, signed with an HMAC-SHA256 of a secret each process draws at start
// (a token outlives neither its five minutes nor the process; no store). The confirm acts on the
// token's filter, never on one sent again, so what runs is what was previewed.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { BulkAction, BulkFilter } from "./filter.ts";

export const TOKEN_TTL_MS = 5 * 60_000;

const Payload = z
  .object({
    action: BulkAction,
    filter: BulkFilter,
    count: z.number().int().min(0),
    region: z.string(),
    expires: z.number().int(),
  })
  .strict();
export type BulkGrant = z.infer<typeof Payload>;

export interface BulkSigner {
  sign(g: Omit<BulkGrant, "expires">, now?: number): { token: string; expiresAt: string };
  verify(
    token: unknown,
    expect: { action: BulkAction; region: string },
    now?: number,
  ): { ok: true; grant: BulkGrant } | { ok: false; reason: string };
}

const b64 = (b: Buffer | string) => Buffer.from(b).toString("base64url");

/** A signer with its own secret (`secret`: tests pass one; else 32 random bytes). */
export function bulkSigner(secret: Buffer = randomBytes(32), ttlMs = TOKEN_TTL_MS): BulkSigner {
  const mac = (body: string) => createHmac("sha256", secret).update(body).digest();
  return {
    sign(g, now = Date.now()) {
      const expires = now + ttlMs;
      const body = b64(JSON.stringify({ ...g, expires }));
      return { token: `${body}.${b64(mac(body))}`, expiresAt: new Date(expires).toISOString() };
    },
    verify(token, expect, now = Date.now()) {
      if (typeof token !== "string" || token.length > 8192)
        return { ok: false, reason: "token: not a preview's token" };
      const [body, sig, ...rest] = token.split(".");
      if (!body || !sig || rest.length) return { ok: false, reason: "token: not a preview's token" };
      const want = mac(body);
      const got = Buffer.from(sig, "base64url");
      if (got.length !== want.length || !timingSafeEqual(got, want))
        return {
          ok: false,
          reason: "token: not issued by this console (or it restarted since the preview): preview again",
        };
      let grant: BulkGrant;
      try {
        grant = Payload.parse(JSON.parse(Buffer.from(body, "base64url").toString("utf8")));
      } catch {
        return { ok: false, reason: "token: not a preview's token" };
      }
      if (grant.expires <= now) return { ok: false, reason: "token: the preview expired (5 minutes): preview again" };
      if (grant.region !== expect.region)
        return { ok: false, reason: `token: previewed in region ${grant.region}, this is ${expect.region}` };
      if (grant.action !== expect.action)
        return { ok: false, reason: `token: previewed for a bulk ${grant.action}, not a bulk ${expect.action}` };
      return { ok: true, grant };
    },
  };
}
