import { expect, test } from "bun:test";
import type { TaskType } from "@pipeline/shared/schemas";
import { type Breaker, createBreaker } from "./breaker.ts";
import { createKeyRing, keyInUse, routeOrder } from "./keyring.ts";

const prices = (turnstile: number) => ({ turnstile }) as Record<TaskType, number>;
const terms = (id: string) =>
  ({
    default: { id, priority: 0, priceMicros: prices(1450) },
    b: { id, priority: 1, priceMicros: prices(3000) },
    c: { id, priority: 0, priceMicros: prices(3000) },
  })[id]!;
const breakers: Record<string, Breaker> = {};
const makeBreaker = (k: { ref: string }) =>
  (breakers[k.ref] = createBreaker(
    { failureRate: 0.5, minCalls: 1, windowMs: 10_000, cooldownMs: 60_000, maxCooldownMs: 60_000 },
    Date.now,
    () => {},
  ));

test("routing: the cheapest usable account first, then by priority, then as configured; an open breaker is passed over", () => {
  const a = { ...keyInUse("default", "key-a"), account: "default" };
  const b = { ...keyInUse("b", "key-b"), account: "b" };
  const c = { ...keyInUse("c", "key-c"), account: "c" };
  const ring = createKeyRing(a, makeBreaker, { extras: [b, c], terms });
  expect(routeOrder(ring, "turnstile").map((k) => k.account)).toEqual(["default", "c", "b"]);
  breakers[a.ref]!.keyStopped("ERROR_ZERO_BALANCE");
  expect(routeOrder(ring, "turnstile").map((k) => k.account)).toEqual(["c", "b"]);
  expect(ring.byRef(b.ref)).toBe(b);
  // The default key rotated away: its old reference is no key in use; PROVIDERS' keys stay.
  const a2 = { ...keyInUse("spare", "key-a2"), account: "default" };
  ring.use(a2);
  expect(ring.byRef(a.ref)).toBeUndefined();
  expect(ring.accounts().map((k) => k.ref)).toEqual([a2.ref, b.ref, c.ref]);
});

test("routing: an account below its balance floor goes after the others, whatever its price; unknown balance is no reason", () => {
  const withFloor = (id: string) => ({ ...terms(id), floorMicros: 1_000_000 });
  const a = { ...keyInUse("default", "key-fa"), account: "default" };
  const b = { ...keyInUse("b", "key-fb"), account: "b" };
  const ring = createKeyRing(a, makeBreaker, { extras: [b], terms: withFloor });
  expect(routeOrder(ring, "turnstile").map((k) => k.account)).toEqual(["default", "b"]);
  ring.setBalances(new Map([[a.ref, 500_000]]));
  expect(ring.belowFloor(a)).toBe(true);
  expect(routeOrder(ring, "turnstile").map((k) => k.account)).toEqual(["b", "default"]);
  ring.setBalances(new Map([[a.ref, 5_000_000]]));
  expect(routeOrder(ring, "turnstile").map((k) => k.account)).toEqual(["default", "b"]);
});
