import { expect, test } from "bun:test";
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
