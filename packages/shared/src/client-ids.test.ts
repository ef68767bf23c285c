import { expect, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import {
  clientIdOf,
  PEPPERED_CLIENT_ID,
  pepperedClientId,
  UNPEPPERED_CLIENT_ID,
  unpepperedClientId,
} from "./client-ids.ts";

const KEY = "alpha-key-0123456789abcdef0123456789";
const PEPPER = "pepper-0123456789abcdef0123456789abcdef";

test("one client id per key: peppered (32 hex of HMAC-SHA256) with a pepper, else the unpeppered sha256 prefix (16 hex)", () => {
  const peppered = clientIdOf(KEY, PEPPER);
  expect(peppered).toBe(pepperedClientId(PEPPER, KEY));
  expect(peppered).toBe(createHmac("sha256", PEPPER).update(KEY).digest("hex").slice(0, 32));
  expect(peppered).toMatch(PEPPERED_CLIENT_ID);
  expect(peppered).not.toMatch(UNPEPPERED_CLIENT_ID);
  const unpeppered = clientIdOf(KEY);
  expect(unpeppered).toBe(unpepperedClientId(KEY));
  expect(unpeppered).toBe(createHash("sha256").update(KEY).digest("hex").slice(0, 16));
  expect(unpeppered).toMatch(UNPEPPERED_CLIENT_ID);
  expect(unpeppered).not.toMatch(PEPPERED_CLIENT_ID);
  // The same key and pepper always give the same id; another pepper another one.
  expect(clientIdOf(KEY, PEPPER)).toBe(peppered);
  expect(clientIdOf(KEY, `${PEPPER}x`)).not.toBe(peppered);
});
