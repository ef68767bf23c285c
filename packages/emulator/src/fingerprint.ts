import { createHash } from "node:crypto";

/** Parameters that do not change what task is asked for, so they stay out of the fingerprint. */
export const FINGERPRINT_EXCLUDED: ReadonlySet<string> = new Set([
  "key",
  "json",
  "soft_id",
  "header_acao",
  "pingback",
  "method",
]);

/**
 * Fingerprint of a provider task: sha256 over the method and the sorted params, excluding
 * key, json, soft_id, header_acao and pingback (and a `method` entry, which is the first
 * argument). Hex, first 16 chars. A multipart `file` (method=post) is represented by its
 * base64 text under `file`. Equal tasks give equal fingerprints whatever the param order.
 */
export function fingerprintOf(method: string, params: Record<string, string>): string {
  const entries = Object.entries(params)
    .filter(([k]) => !FINGERPRINT_EXCLUDED.has(k))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash("sha256")
    .update(JSON.stringify([method, entries]))
    .digest("hex")
    .slice(0, 16);
}
