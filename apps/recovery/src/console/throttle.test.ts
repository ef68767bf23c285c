import { expect, test } from "bun:test";
import { signInThrottle } from "./throttle.ts";

test("signInThrottle: maxFailures within the window throttle a source until the window ends; other sources are not touched", () => {
  let t = 0;
  const th = signInThrottle({ maxFailures: 3, windowMs: 60_000, now: () => t });
  for (let i = 0; i < 2; i++) th.failed("10.0.0.1");
  expect(th.blocked("10.0.0.1")).toBeUndefined();
  t = 10_000;
  th.failed("10.0.0.1");
  expect(th.blocked("10.0.0.1")).toBe(50);
  expect(th.blocked("10.0.0.2")).toBeUndefined();
  t = 59_500;
  expect(th.blocked("10.0.0.1")).toBe(1);
  t = 60_000;
  expect(th.blocked("10.0.0.1")).toBeUndefined();
  th.failed("10.0.0.1");
  expect(th.blocked("10.0.0.1")).toBeUndefined();
});

test("signInThrottle: memory is bounded; expired entries go first, then the oldest", () => {
  let t = 0;
  const th = signInThrottle({ maxFailures: 1, windowMs: 1000, maxSources: 3, now: () => t });
  th.failed("a");
  t = 2000;
  th.failed("b");
  th.failed("c");
  th.failed("d");
  expect(th.size()).toBe(3);
  expect(th.blocked("b")).toBe(1);
  th.failed("e");
  expect(th.size()).toBe(3);
  expect(th.blocked("b")).toBeUndefined();
  expect(th.blocked("e")).toBe(1);
});
