import { expect, test } from "bun:test";
import { clientWebhookSecret, signatureHeader, verifyWebhook, WEBHOOK_HEADERS } from "@pipeline/shared/webhooks";
import { CALLBACK_HEADERS, verifyCallback } from "./signature.ts";

const secret = clientWebhookSecret("master-secret-for-tests", "0123456789abcdef");
const body = JSON.stringify({ id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a01", status: "completed", note: "é ✓" });
const now = 1_800_000_000;

test("the header names are the pipeline's", () => {
  expect(CALLBACK_HEADERS).toEqual(WEBHOOK_HEADERS);
});

test("a callback signed by @pipeline/shared/webhooks verifies (string or bytes, Headers or a plain object, any header case)", () => {
  const headers = {
    [WEBHOOK_HEADERS.delivery]: "task:completed:0",
    [WEBHOOK_HEADERS.timestamp]: String(now),
    [WEBHOOK_HEADERS.signature]: signatureHeader([secret], now, body),
  };
  expect(
    verifyWebhook(secret, { timestamp: String(now), signature: headers[WEBHOOK_HEADERS.signature]! }, body, now),
  ).toBe(true);
  expect(verifyCallback({ body, headers, secret, nowSec: now })).toEqual({
    ok: true,
    deliveryId: "task:completed:0",
    timestamp: now,
  });
  expect(
    verifyCallback({ body: new TextEncoder().encode(body), headers: new Headers(headers), secret, nowSec: now }).ok,
  ).toBe(true);
  const upper = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), v]));
  expect(verifyCallback({ body, headers: upper, secret, nowSec: now }).ok).toBe(true);
});

test("during a rotation (two signatures) either secret verifies; a third does not", () => {
  const next = clientWebhookSecret("master-secret-for-tests", "0123456789abcdef", 1);
  const headers = {
    [WEBHOOK_HEADERS.timestamp]: String(now),
    [WEBHOOK_HEADERS.signature]: signatureHeader([next, secret], now, body),
  };
  expect(verifyCallback({ body, headers, secret, nowSec: now }).ok).toBe(true);
  expect(verifyCallback({ body, headers, secret: next, nowSec: now }).ok).toBe(true);
  expect(verifyCallback({ body, headers, secret: ["whsec_other", next], nowSec: now }).ok).toBe(true);
  expect(verifyCallback({ body, headers, secret: "whsec_other", nowSec: now })).toEqual({
    ok: false,
    reason: "bad_signature",
  });
});

test("refusals say why, as @pipeline/shared refuses the same inputs: body changed, too old, missing or bad headers", () => {
  const sig = signatureHeader([secret], now, body);
  const h = (ts: string | undefined, s: string | undefined) => ({
    ...(ts !== undefined ? { [WEBHOOK_HEADERS.timestamp]: ts } : {}),
    ...(s !== undefined ? { [WEBHOOK_HEADERS.signature]: s } : {}),
  });
  const cases: [string, Record<string, string>, number, string][] = [
    [`${body} `, h(String(now), sig), now, "bad_signature"],
    [body, h(String(now), sig), now + 301, "too_old"],
    [body, h(String(now), sig), now - 301, "too_old"],
    [body, h(undefined, sig), now, "missing_timestamp"],
    [body, h("12abc", sig), now, "bad_timestamp"],
    [body, h(String(now), undefined), now, "missing_signature"],
    [
      body,
      h(
        String(now),
        sig.replace(/.$/, (c) => (c === "0" ? "1" : "0")),
      ),
      now,
      "bad_signature",
    ],
  ];
  for (const [b, headers, at, reason] of cases) {
    expect(verifyCallback({ body: b, headers, secret, nowSec: at })).toEqual({ ok: false, reason } as never);
    const shared = verifyWebhook(
      secret,
      { timestamp: headers[WEBHOOK_HEADERS.timestamp] ?? null, signature: headers[WEBHOOK_HEADERS.signature] ?? null },
      b,
      at,
    );
    expect(shared).toBe(false);
  }
  expect(verifyCallback({ body, headers: h(String(now), sig), secret, nowSec: now + 301, toleranceSec: 600 }).ok).toBe(
    true,
  );
});
