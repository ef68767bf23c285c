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

test("each client has its own secret from one master: a callback signed for one does not verify with another's (issue 14.3)", async () => {
  const { clientWebhookSecret, signatureHeader } = await import("./webhooks.ts");
  const a = clientWebhookSecret("master-secret-0001", "client-a");
  const b = clientWebhookSecret("master-secret-0001", "client-b");
  expect(a).not.toBe(b);
  expect(a).toBe(clientWebhookSecret("master-secret-0001", "client-a"));
  expect(a).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
  const body = '{"task":1}';
  const h = { timestamp: "1700000000", signature: signatureHeader([a], 1_700_000_000, body) };
  expect(verifyWebhook(a, h, body, 1_700_000_000)).toBe(true);
  expect(verifyWebhook(b, h, body, 1_700_000_000)).toBe(false);
  // During a rotation two signatures ride in the header; either secret verifies.
  const next = clientWebhookSecret("master-secret-0002", "client-a");
  const both = { timestamp: "1700000000", signature: signatureHeader([next, a], 1_700_000_000, body) };
  expect(verifyWebhook(a, both, body, 1_700_000_000)).toBe(true);
  expect(verifyWebhook(next, both, body, 1_700_000_000)).toBe(true);
  expect(verifyWebhook(b, both, body, 1_700_000_000)).toBe(false);
});

test("one client's secret rotates alone: raising its generation changes its secret and no other's; the previous generation signs until removed", async () => {
  const { clientSigningSecrets, clientWebhookSecret, signatureHeader } = await import("./webhooks.ts");
  const m = "master-secret-0001";
  // Generation 0 is the derivation every client had before generations existed.
  expect(clientWebhookSecret(m, "aaaa", 0)).toBe(clientWebhookSecret(m, "aaaa"));
  const gens = { aaaa: { current: 1, previous: 0 } };
  const [a1, a0] = clientSigningSecrets([m], "aaaa", gens);
  expect(a1).toBe(clientWebhookSecret(m, "aaaa", 1));
  expect(a1).not.toBe(clientWebhookSecret(m, "aaaa"));
  expect(a0).toBe(clientWebhookSecret(m, "aaaa"));
  // Another client is untouched: still generation 0, one signature.
  expect(clientSigningSecrets([m], "bbbb", gens)).toEqual([clientWebhookSecret(m, "bbbb")]);
  // During the move both verify; once `previous` is removed, the old secret no longer does.
  const body = '{"task":1}';
  const during = {
    timestamp: "1700000000",
    signature: signatureHeader(clientSigningSecrets([m], "aaaa", gens), 1_700_000_000, body),
  };
  expect(verifyWebhook(a0!, during, body, 1_700_000_000)).toBe(true);
  expect(verifyWebhook(a1!, during, body, 1_700_000_000)).toBe(true);
  const after = {
    timestamp: "1700000000",
    signature: signatureHeader(clientSigningSecrets([m], "aaaa", { aaaa: { current: 1 } }), 1_700_000_000, body),
  };
  expect(verifyWebhook(a0!, after, body, 1_700_000_000)).toBe(false);
  expect(verifyWebhook(a1!, after, body, 1_700_000_000)).toBe(true);
  // With a master rotation too: the previous master signs at the client's current generation.
  expect(clientSigningSecrets(["master-2", m], "aaaa", { aaaa: { current: 1 } })).toEqual([
    clientWebhookSecret("master-2", "aaaa", 1),
    a1!,
  ]);
});
