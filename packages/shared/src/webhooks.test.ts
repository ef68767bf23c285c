import { expect, test } from "bun:test";
import { signWebhook, verifyWebhook } from "./webhooks.ts";

test("a signature verifies with the right secret and body, and only within the tolerance", () => {
  const body = '{"a":1}';
  const sig = signWebhook("s3cret-s3cret-s3cret", 1_700_000_000, body);
  expect(sig).toMatch(/^v1=[0-9a-f]{64}$/);
  const h = { timestamp: "1700000000", signature: sig };
  expect(verifyWebhook("s3cret-s3cret-s3cret", h, body, 1_700_000_100)).toBe(true);
  expect(verifyWebhook("other-secret-other", h, body, 1_700_000_100)).toBe(false);
  expect(verifyWebhook("s3cret-s3cret-s3cret", h, '{"a":2}', 1_700_000_100)).toBe(false);
  expect(verifyWebhook("s3cret-s3cret-s3cret", h, body, 1_700_001_000)).toBe(false);
});
