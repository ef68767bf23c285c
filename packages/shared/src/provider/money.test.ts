import { expect, test } from "bun:test";
import { balanceMicros, formatMicros, priceMicros } from "./money.ts";

test("a provider's price text is read as integer micro-dollars, without float drift", () => {
  expect(priceMicros("0.00299")).toBe(2990);
  expect(priceMicros("0.00145")).toBe(1450);
  expect(priceMicros("1")).toBe(1_000_000);
  expect(priceMicros(" 12.345 ")).toBe(12_345_000);
  expect(priceMicros("0.0000005")).toBe(1);
  expect(priceMicros("0.0000004")).toBe(0);
  expect(priceMicros(0.1 + 0.2)).toBe(300_000);
  expect(priceMicros(0.00299)).toBe(2990);
});

test("anything that is not a non-negative decimal is no price", () => {
  for (const bad of ["", "-1", "abc", "1e-3", "0.1.2", undefined, null, {}, Number.NaN])
    expect(priceMicros(bad)).toBeUndefined();
});

test("micro-dollars print with six decimals", () => {
  expect(formatMicros(2990)).toBe("0.002990");
  expect(formatMicros(-2990)).toBe("-0.002990");
  expect(formatMicros(12_345_000)).toBe("12.345000");
});

test("a balance is read like a price, and may be negative (an account in debt)", () => {
  expect(balanceMicros("99.88041")).toBe(99_880_410);
  expect(balanceMicros("100")).toBe(100_000_000);
  expect(balanceMicros("-0.5")).toBe(-500_000);
  expect(balanceMicros(-0.00299)).toBe(-2990);
  expect(balanceMicros(3.2857)).toBe(3_285_700);
  for (const bad of ["", "-", "--1", "abc", "1e3", undefined, null]) expect(balanceMicros(bad)).toBeUndefined();
});
