import { describe, expect, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import { LEGACY_CLIENT_ID, ownerRewrites, PEPPERED_CLIENT_ID, pepperedClientId } from "@pipeline/shared/client-ids";
import { bearerToken, clientIdOf, createApiKeys, ownedBy } from "./api-keys.ts";

test("known keys map to a client id that is not the key", () => {
  const keys = createApiKeys(["alpha-key", "beta-key"]);
  expect(keys.clientOf("alpha-key")).toBe(clientIdOf("alpha-key"));
  expect(keys.clientOf("alpha-key")).not.toContain("alpha");
  expect(keys.clientOf("beta-key")).not.toBe(keys.clientOf("alpha-key"));
  expect(keys.clientOf("gamma-key")).toBeUndefined();
});

test("bearer token parsing", () => {
  expect(bearerToken("Bearer abc")).toBe("abc");
  expect(bearerToken("bearer  abc ")).toBe("abc");
  expect(bearerToken("Basic abc")).toBeUndefined();
  expect(bearerToken(undefined)).toBeUndefined();
});

describe("peppered client ids (issue 14.8)", () => {
  const KEY = "alpha-key-0123456789abcdef0123456789";
  const PEPPER = "pepper-0123456789abcdef0123456789abcdef";
  const sha256Prefix = (k: string) => createHash("sha256").update(k).digest("hex").slice(0, 16);

  test("with API_KEY_PEPPER a key's id is 32 hex characters of HMAC-SHA256(pepper, key): not the sha256 prefix, not the key", () => {
    const id = createApiKeys([KEY], { pepper: PEPPER }).clientOf(KEY)!;
    expect(id).toMatch(PEPPERED_CLIENT_ID);
    expect(id).toBe(createHmac("sha256", PEPPER).update(KEY).digest("hex").slice(0, 32));
    expect(id).not.toContain(sha256Prefix(KEY));
    expect(id).not.toContain("alpha");
    // Another pepper, another id: without the pepper a guessed key cannot be tested against a row.
    expect(createApiKeys([KEY], { pepper: `${PEPPER}x` }).clientOf(KEY)).not.toBe(id);
  });

  test("without a pepper: the legacy id (16 hex, the sha256 prefix), as before", () => {
    const id = createApiKeys([KEY]).clientOf(KEY)!;
    expect(id).toMatch(LEGACY_CLIENT_ID);
    expect(id).toBe(sha256Prefix(KEY));
    expect(createApiKeys([KEY]).ownersOf(id)).toEqual([id]);
  });

  test("API_KEY_LEGACY_IDS: a key is known by its new id and its legacy id, the new one first; without it, by the new one only", () => {
    const during = createApiKeys([KEY, "beta-key-0123456789abcdef0123456789"], { pepper: PEPPER, legacyIds: true });
    const id = during.clientOf(KEY)!;
    expect(during.ownersOf(id)).toEqual([id, sha256Prefix(KEY)]);
    expect(ownedBy(during, id, sha256Prefix(KEY))).toBe(true);
    expect(ownedBy(during, id, sha256Prefix("beta-key-0123456789abcdef0123456789"))).toBe(false);
    const after = createApiKeys([KEY], { pepper: PEPPER });
    expect(after.ownersOf(id)).toEqual([id]);
    expect(ownedBy(after, id, sha256Prefix(KEY))).toBe(false);
    // A legacy switch without a pepper means nothing (the config refuses it too).
    expect(createApiKeys([KEY], { legacyIds: true }).ownersOf(sha256Prefix(KEY))).toEqual([sha256Prefix(KEY)]);
  });

  test("ownerRewrites maps each key's legacy id to its peppered id, and names no key", () => {
    const rw = ownerRewrites([KEY, KEY, "beta-key-0123456789abcdef0123456789"], PEPPER);
    expect(rw).toEqual([
      { from: sha256Prefix(KEY), to: createApiKeys([KEY], { pepper: PEPPER }).clientOf(KEY)! },
      {
        from: sha256Prefix("beta-key-0123456789abcdef0123456789"),
        to: pepperedClientId(PEPPER, "beta-key-0123456789abcdef0123456789"),
      },
    ]);
    expect(JSON.stringify(rw)).not.toContain("key-0123");
  });
});
