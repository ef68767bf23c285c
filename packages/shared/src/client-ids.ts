import { createHash, createHmac } from "node:crypto";

/**
 * Client ids (issue 14.8): what a task row's `owner` holds for an API key, never the key itself.
 * One id per key. With a pepper (`API_KEY_PEPPER`, a secret of the gateways) the id is 32 hex
 * characters of HMAC-SHA256(pepper, key): without the pepper, whoever reads rows, events or
 * snapshots cannot test a guessed key against it. Without one (dev stacks and tests only: the
 * gateway requires a pepper outside dev), the unpeppered id: the first 16 hex characters of
 * sha256(key). The two formats differ in length, so a row tells which it is.
 */

/** Shortest pepper accepted. */
export const MIN_PEPPER_LENGTH = 32;
/** An unpeppered client id (dev stacks and tests): 16 hex characters. */
export const UNPEPPERED_CLIENT_ID = /^[0-9a-f]{16}$/;
/** A peppered client id: 32 hex characters. */
export const PEPPERED_CLIENT_ID = /^[0-9a-f]{32}$/;

/** The unpeppered id of a key: the first 16 hex characters of its sha256. */
export function unpepperedClientId(key: string): string {
  return createHash("sha256").update(key).digest("hex").slice(0, 16);
}

/** The peppered id of a key: the first 32 hex characters of HMAC-SHA256(pepper, key). */
export function pepperedClientId(pepper: string, key: string): string {
  return createHmac("sha256", pepper).update(key).digest("hex").slice(0, 32);
}

/** A key's client id: peppered when a pepper is given, else the unpeppered id. */
export function clientIdOf(key: string, pepper?: string): string {
  return pepper ? pepperedClientId(pepper, key) : unpepperedClientId(key);
}
