import { expect, test } from "bun:test";
import { createAuthThrottle, keyFingerprint } from "./auth-throttle.ts";

test("a key is throttled at a source after maxFailures failures in the window, until the window ends; other sources are not", () => {
  let t = 1_000_000;
  const th = createAuthThrottle({ maxFailures: 3, windowMs: 60_000, now: () => t });
  expect(th.failed("203.0.113.5", "revoked-key")).toBeUndefined();
  expect(th.failed("203.0.113.5", "revoked-key")).toBeUndefined();
  expect(th.blocked("203.0.113.5", "revoked-key")).toBeUndefined();
  expect(th.failed("203.0.113.5", "revoked-key")).toBe(60);
  expect(th.blocked("203.0.113.5", "revoked-key")).toBe(60);
  expect(th.blocked("198.51.100.7", "revoked-key")).toBeUndefined();
  t += 45_500;
  expect(th.blocked("203.0.113.5", "revoked-key")).toBe(15);
  t += 14_500;
  expect(th.blocked("203.0.113.5", "revoked-key")).toBeUndefined();
  expect(th.failed("203.0.113.5", "revoked-key")).toBeUndefined();
});

test("one client's failures do not throttle another key from the same address (a load balancer, a NAT): the address is refused only past maxPerSource", () => {
  const fresh = createAuthThrottle({ maxFailures: 3, maxPerSource: 10, windowMs: 60_000, now: () => 0 });
  // The caller asks blocked() first and counts only checked keys: a throttled key adds nothing.
  for (let i = 0; i < 3; i++) fresh.failed("10.0.1.5", "one-clients-bad-key");
  expect(fresh.blocked("10.0.1.5", "one-clients-bad-key")).toBe(60);
  expect(fresh.blocked("10.0.1.5", "a-valid-key-of-another-client")).toBeUndefined();
  // A guesser: a new key each time. Nine guesses pass through (each its own key), the tenth
  // throttles the whole address, valid keys included (no oracle while throttled).
  for (let i = 0; i < 6; i++) expect(fresh.failed("10.0.1.5", `guess-${i}`)).toBeUndefined();
  expect(fresh.failed("10.0.1.5", "guess-6")).toBe(60);
  expect(fresh.blocked("10.0.1.5", "a-valid-key-of-another-client")).toBe(60);
  expect(fresh.blocked("10.0.1.6", "a-valid-key-of-another-client")).toBeUndefined();
});

test("maxPerSource defaults to ten times maxFailures", () => {
  const th = createAuthThrottle({ maxFailures: 2, windowMs: 60_000, now: () => 0 });
  for (let i = 0; i < 19; i++) expect(th.failed("a", `k${i}`)).toBeUndefined();
  expect(th.failed("a", "k19")).toBe(60);
});

test("the fingerprint is short, stable and differs between keys; it is not the key", () => {
  const k = "a-client-key-0123456789abcdef0123456789";
  expect(keyFingerprint(k)).toBe(keyFingerprint(k));
  expect(keyFingerprint(k)).not.toBe(keyFingerprint(`${k}x`));
  expect(keyFingerprint(k).length).toBeLessThanOrEqual(13);
  expect(k).not.toContain(keyFingerprint(k));
});

test("memory stays bounded: expired entries go first, then the oldest", () => {
  let t = 0;
  const th = createAuthThrottle({ maxFailures: 2, windowMs: 1000, maxSources: 3, now: () => t });
  for (const s of ["a", "b", "c"]) th.failed(s, "k");
  t += 2000;
  th.failed("d", "k");
  expect(th.size()).toBe(2);
  th.failed("e", "k");
  th.failed("f", "k");
  th.failed("g", "k");
  expect(th.size()).toBe(6);
});

test("active(): false until a failure, true within its window, false (and emptied) once every window has ended", () => {
  let t = 0;
  const th = createAuthThrottle({ maxFailures: 2, windowMs: 1000, now: () => t });
  expect(th.active()).toBe(false);
  th.failed("a", "k");
  t += 600;
  th.failed("b", "k");
  expect(th.active()).toBe(true);
  t += 500; // a's window ended, b's has not
  expect(th.active()).toBe(true);
  expect(th.blocked("b", "k")).toBeUndefined();
  th.failed("b", "k");
  expect(th.blocked("b", "k")).toBe(1);
  t += 1000;
  expect(th.active()).toBe(false);
  expect(th.size()).toBe(0);
  expect(th.blocked("b", "k")).toBeUndefined();
});
