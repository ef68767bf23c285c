import { describe, expect, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import { PEPPERED_CLIENT_ID, UNPEPPERED_CLIENT_ID } from "@pipeline/shared/client-ids";
import { bearerToken, clientIdOf, createApiKeys } from "./api-keys.ts";

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

  test("without a pepper (dev stacks and tests): the unpeppered id (16 hex, the sha256 prefix)", () => {
    const id = createApiKeys([KEY]).clientOf(KEY)!;
    expect(id).toMatch(UNPEPPERED_CLIENT_ID);
    expect(id).toBe(sha256Prefix(KEY));
    expect(clientIdOf(KEY)).toBe(id);
  });
});
