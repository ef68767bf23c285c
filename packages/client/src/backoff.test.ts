import { expect, test } from "bun:test";
import { backoffMs, parseRetryAfter, retryDelayMs } from "./backoff.ts";

const p = { baseMs: 100, maxMs: 5000 };

test("full jitter: each wait lies in [0, min(maxMs, baseMs * 2^retry)), its ceiling doubling per retry", () => {
  for (let retry = 0; retry < 10; retry++) {
    const ceiling = Math.min(5000, 100 * 2 ** retry);
    expect(backoffMs(retry, p, () => 0)).toBe(0);
    expect(backoffMs(retry, p, () => 0.999999)).toBe(ceiling - 1);
    for (let i = 0; i < 200; i++) {
      const w = backoffMs(retry, p);
      expect(w).toBeGreaterThanOrEqual(0);
      expect(w).toBeLessThan(ceiling);
    }
  }
  // Spread over the range, not bunched at one end.
  const waits = Array.from({ length: 2000 }, () => backoffMs(3, p));
  expect(Math.min(...waits)).toBeLessThan(100);
  expect(Math.max(...waits)).toBeGreaterThan(700);
});

test("Retry-After: delay-seconds, an HTTP date (a past one is 0), and nothing for absent or unreadable values", () => {
  const now = Date.parse("2026-12-06T12:00:00Z");
  expect(parseRetryAfter("3", now)).toBe(3000);
  expect(parseRetryAfter(" 0 ", now)).toBe(0);
  expect(parseRetryAfter("Sun, 06 Dec 2026 12:00:07 GMT", now)).toBe(7000);
  expect(parseRetryAfter("Sun, 06 Dec 2026 11:59:00 GMT", now)).toBe(0);
  expect(parseRetryAfter(null, now)).toBeUndefined();
  expect(parseRetryAfter(undefined, now)).toBeUndefined();
  expect(parseRetryAfter("-1", now)).toBeUndefined();
  expect(parseRetryAfter("1.5", now)).toBeUndefined();
  expect(parseRetryAfter("soon", now)).toBeUndefined();
});

test("a retry waits what Retry-After says (capped at maxMs), else the jittered backoff", () => {
  expect(retryDelayMs(0, p, 2000, () => 0)).toBe(2000);
  expect(retryDelayMs(0, p, 60_000, () => 0)).toBe(5000);
  expect(retryDelayMs(2, p, undefined, () => 0.5)).toBe(200);
});
