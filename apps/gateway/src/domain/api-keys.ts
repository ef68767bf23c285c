import { timingSafeEqual } from "node:crypto";
import { clientIdOf as deriveClientId, legacyClientId } from "@pipeline/shared/client-ids";
import { sha256 } from "@pipeline/shared/sha256";

export interface ApiKeys {
  /** The client id (safe to store and log) of a key, or undefined for an unknown key. */
  clientOf(key: string): string | undefined;
  /**
   * The `owner` values a client's rows may carry: its id, and during the transition to peppered
   * ids (`API_KEY_LEGACY_IDS`) its legacy id too. The first is always the client id itself.
   */
  ownersOf(clientId: string): readonly string[];
}

/** How ids are derived (issue 14.8): `pepper` = API_KEY_PEPPER; `legacyIds` = API_KEY_LEGACY_IDS (a key is also known by its legacy id). */
export interface ClientIdOptions {
  pepper?: string | undefined;
  legacyIds?: boolean | undefined;
}

/** The legacy client id of a key (16 hex characters of its sha256): what keys are named by without a pepper. */
export function clientIdOf(key: string): string {
  return legacyClientId(key);
}

/** Looks keys up by digest, compared in constant time. Keys themselves are never stored. */
export function createApiKeys(keys: readonly string[], o: ClientIdOptions = {}): ApiKeys {
  const known = keys.map((k) => ({ d: sha256(k), id: deriveClientId(k, o.pepper) }));
  const owners = new Map<string, readonly string[]>();
  for (const k of keys) {
    const id = deriveClientId(k, o.pepper);
    owners.set(id, o.pepper && o.legacyIds ? [id, legacyClientId(k)] : [id]);
  }
  return {
    clientOf(key) {
      const d = sha256(key);
      let found: string | undefined;
      for (const k of known) if (timingSafeEqual(k.d, d)) found = k.id;
      return found;
    },
    ownersOf(clientId) {
      return owners.get(clientId) ?? [clientId];
    },
  };
}

/** Does a row with this `owner` belong to the client (its id, or during the transition its legacy id)? */
export function ownedBy(apiKeys: Pick<ApiKeys, "ownersOf">, clientId: string, owner: string): boolean {
  return apiKeys.ownersOf(clientId).includes(owner);
}

/** The bearer token of an Authorization header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return m?.[1];
}
