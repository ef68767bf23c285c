import { timingSafeEqual } from "node:crypto";
import { clientIdOf as deriveClientId, unpepperedClientId } from "@pipeline/shared/client-ids";
import { sha256 } from "@pipeline/shared/sha256";

export interface ApiKeys {
  /** The client id (safe to store and log) of a key, or undefined for an unknown key: a row is the client's when its `owner` is this id. */
  clientOf(key: string): string | undefined;
}

/** How ids are derived (issue 14.8): `pepper` = API_KEY_PEPPER. */
export interface ClientIdOptions {
  pepper?: string | undefined;
}

/** The unpeppered client id of a key (16 hex characters of its sha256): what keys are named by without a pepper. */
export function clientIdOf(key: string): string {
  return unpepperedClientId(key);
}

/** Looks keys up by digest, compared in constant time. Keys themselves are never stored. */
export function createApiKeys(keys: readonly string[], o: ClientIdOptions = {}): ApiKeys {
  const known = keys.map((k) => ({ d: sha256(k), id: deriveClientId(k, o.pepper) }));
  return {
    clientOf(key) {
      const d = sha256(key);
      let found: string | undefined;
      for (const k of known) if (timingSafeEqual(k.d, d)) found = k.id;
      return found;
    },
  };
}

/** The bearer token of an Authorization header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return m?.[1];
}
