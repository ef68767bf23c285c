import { createHash, timingSafeEqual } from "node:crypto";

export interface ApiKeys {
  /** The client id (a hash prefix, safe to store and log) of a key, or undefined for an unknown key. */
  clientOf(key: string): string | undefined;
}

const digest = (k: string) => createHash("sha256").update(k).digest();

/** Client id of a key: the first 16 hex characters of its sha256. Keys themselves are never stored. */
export function clientIdOf(key: string): string {
  return digest(key).toString("hex").slice(0, 16);
}

/** Looks keys up by digest, compared in constant time. */
export function createApiKeys(keys: readonly string[]): ApiKeys {
  const known = keys.map((k) => ({ d: digest(k), id: clientIdOf(k) }));
  return {
    clientOf(key) {
      const d = digest(key);
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
