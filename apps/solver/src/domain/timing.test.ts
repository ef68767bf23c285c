import { expect, test } from "bun:test";
import { backoff, firstPollDelay, timingInUse, tokenExpiry } from "./timing.ts";

test("backoff doubles per attempt, stays within [ceiling/2, ceiling], and is capped", () => {
  const lo = () => 0;
  const hi = () => 1;
  expect([1, 2, 3, 4].map((n) => backoff(n, 1000, 60_000, hi))).toEqual([1000, 2000, 4000, 8000]);
  expect([1, 2, 3, 4].map((n) => backoff(n, 1000, 60_000, lo))).toEqual([500, 1000, 2000, 4000]);
  expect(backoff(30, 1000, 60_000, hi)).toBe(60_000);
  for (let i = 0; i < 100; i++) {
    const d = backoff(3, 1000, 60_000);
    expect(d).toBeGreaterThanOrEqual(2000);
    expect(d).toBeLessThanOrEqual(4000);
  }
});

test("first poll waits per type unless overridden", () => {
  expect(firstPollDelay("image", undefined)).toBe(5000);
  expect(firstPollDelay("recaptcha_v2", undefined)).toBe(15_000);
  expect(firstPollDelay("recaptcha_v2", 20)).toBe(20);
});

test("tokens expire after their lifetime; image answers do not", () => {
  const t = new Date("2026-01-01T00:00:00Z");
  expect(tokenExpiry("turnstile", t, 120_000)!.toISOString()).toBe("2026-01-01T00:02:00.000Z");
  expect(tokenExpiry("image", t, 120_000)).toBeNull();
});

test("a timing applied is read from the next get(); one read before keeps its values", () => {
  const timing = timingInUse({
    leaseMs: 30_000,
    firstPollMs: undefined,
    pollIntervalMs: 5000,
    maxPolls: 60,
    maxResubmits: 2,
    maxAttempts: 5,
    tokenTtlMs: 120_000,
    retryBaseMs: 1000,
    retryMaxMs: 60_000,
    slotWaitMs: 2000,
    providerTimeoutMs: 15_000,
  });
  const before = timing.get();
  timing.apply({ pollIntervalMs: 700, maxPolls: 20, maxResubmits: 3 });
  expect(timing.get()).toEqual({ ...before, pollIntervalMs: 700, maxPolls: 20, maxResubmits: 3 });
  expect(before.pollIntervalMs).toBe(5000);
});
