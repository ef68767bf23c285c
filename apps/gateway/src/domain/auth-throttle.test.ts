import { expect, test } from "bun:test";
import { createAuthThrottle } from "./auth-throttle.ts";

test("a source is throttled after maxFailures failures in the window, until the window ends; other sources are not (issue 14.8)", () => {
  let t = 1_000_000;
  const th = createAuthThrottle({ maxFailures: 3, windowMs: 60_000, now: () => t });
  expect(th.failed("203.0.113.5")).toBeUndefined();
  expect(th.failed("203.0.113.5")).toBeUndefined();
  expect(th.blocked("203.0.113.5")).toBeUndefined();
  expect(th.failed("203.0.113.5")).toBe(60);
  expect(th.blocked("203.0.113.5")).toBe(60);
  expect(th.blocked("198.51.100.7")).toBeUndefined();
  t += 45_500;
  expect(th.blocked("203.0.113.5")).toBe(15);
  t += 14_500;
  expect(th.blocked("203.0.113.5")).toBeUndefined();
  expect(th.failed("203.0.113.5")).toBeUndefined();
});

test("memory stays bounded: expired sources go first, then the oldest", () => {
  let t = 0;
  const th = createAuthThrottle({ maxFailures: 2, windowMs: 1000, maxSources: 3, now: () => t });
  for (const s of ["a", "b", "c"]) th.failed(s);
  t += 2000;
  th.failed("d");
  expect(th.size()).toBe(1);
  th.failed("e");
  th.failed("f");
  th.failed("g");
  expect(th.size()).toBe(3);
});

test("active(): false until a failure, true within its window, false (and emptied) once every window has ended", () => {
  let t = 0;
  const th = createAuthThrottle({ maxFailures: 2, windowMs: 1000, now: () => t });
  expect(th.active()).toBe(false);
  th.failed("a");
  t += 600;
  th.failed("b");
  expect(th.active()).toBe(true);
  t += 500; // a's window ended, b's has not
  expect(th.active()).toBe(true);
  expect(th.blocked("b")).toBeUndefined();
  th.failed("b");
  expect(th.blocked("b")).toBe(1);
  t += 1000;
  expect(th.active()).toBe(false);
  expect(th.size()).toBe(0);
  expect(th.blocked("b")).toBeUndefined();
});
