import { expect, test } from "bun:test";
import { LIST_PRICE_MICROS } from "@pipeline/shared/provider";
import { chargeOf, providerName } from "./charge.ts";

const ctx = { providerHost: "127.0.0.1:18090", region: "fsn1", solverVersion: "v2", estimates: LIST_PRICE_MICROS };

test("a get2 reply's price is the charge, in micro-dollars, from the provider", () => {
  const c = chargeOf(ctx, {
    extra: { price: "0.00299" },
    type: "turnstile",
    providerTaskId: "7001",
    keyRef: "key_abc",
  });
  expect(c).toEqual({
    providerTaskId: "7001",
    provider: "127.0.0.1:18090/key_abc",
    region: "fsn1",
    solverVersion: "v2",
    amountMicros: 2990,
    priceSource: "provider",
  });
});

test("an answer without a price (get, a bulk part) is charged the configured price, flagged as an estimate", () => {
  expect(chargeOf(ctx, { type: "turnstile", providerTaskId: "1", keyRef: "k" })).toMatchObject({
    amountMicros: 1450,
    priceSource: "estimate",
  });
  expect(chargeOf(ctx, { extra: { price: "n/a" }, type: "image", providerTaskId: "1", keyRef: "k" })).toMatchObject({
    amountMicros: 1000,
    priceSource: "estimate",
  });
});

test("the provider is named by host and key reference, never by the key", () => {
  expect(providerName("ocr.captchaai.com", "key_0123456789ab")).toBe("ocr.captchaai.com/key_0123456789ab");
});
