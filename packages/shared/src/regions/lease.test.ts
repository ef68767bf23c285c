import { expect, test } from "bun:test";
import {
  DEFAULT_LEASE_RENEW_MS,
  DEFAULT_LEASE_TIMING,
  LEASE_RETRY_MS,
  leaderLossGapMs,
  maySubmit,
  type Observed,
  otherLeaseAction,
  ownLeaseAction,
  validUntil,
  WITNESS_ELECTION_MAX_MS,
} from "./lease.ts";

const t = { ttlMs: 10_000, marginMs: 3000 };
const seen = (holder: string, epoch: number, changedAt: number): Observed => ({
  lease: { holder, epoch, renewedAt: 0 },
  revision: 1,
  changedAt,
});

test("a region creates its lease, then renews it while it holds it", () => {
  expect(ownLeaseAction("a", undefined, 0, t)).toEqual({ kind: "create" });
  expect(ownLeaseAction("a", seen("a", 3, 0), 50_000, t)).toEqual({ kind: "renew", epoch: 3 });
});

test("another region takes a lease over only after it was still for TTL + margin", () => {
  expect(otherLeaseAction("a", seen("a", 3, 0), 12_999, t)).toEqual({ kind: "wait" });
  expect(otherLeaseAction("a", seen("a", 3, 0), 13_000, t)).toEqual({ kind: "takeover", epoch: 4 });
  // already taken over (by b or someone else): nothing more to take
  expect(otherLeaseAction("a", seen("b", 4, 0), 60_000, t)).toEqual({ kind: "wait" });
});

test("a region that stops renewing stops submitting before anyone can take over: 2 x margin apart", () => {
  const renewedAt = 1_000_000;
  const stop = validUntil(renewedAt, t);
  const takeoverEarliest = renewedAt + t.ttlMs + t.marginMs;
  expect(takeoverEarliest - stop).toBe(2 * t.marginMs);
  expect(maySubmit({ holder: "a", epoch: 1, validUntil: stop }, "a", stop - 1)).toBe(true);
  expect(maySubmit({ holder: "a", epoch: 1, validUntil: stop }, "a", stop)).toBe(false);
});

test("a region whose lease another holds may not submit, and reclaims it once the adopter left it still", () => {
  expect(maySubmit({ holder: "b", epoch: 4, validUntil: Number.MAX_SAFE_INTEGER }, "a", 0)).toBe(false);
  expect(maySubmit(undefined, "a", 0)).toBe(false);
  expect(ownLeaseAction("a", seen("b", 4, 0), 5000, t)).toMatchObject({ kind: "wait" });
  expect(ownLeaseAction("a", seen("b", 4, 0), 13_000, t)).toEqual({ kind: "reclaim", epoch: 5 });
});

test("the default timing survives the witness's leader lost: TTL − margin is at least 1.5 × the longest renewal gap an election can cause", () => {
  const gap = leaderLossGapMs(DEFAULT_LEASE_RENEW_MS);
  expect(gap).toBe(DEFAULT_LEASE_RENEW_MS + WITNESS_ELECTION_MAX_MS + LEASE_RETRY_MS);
  expect(DEFAULT_LEASE_TIMING.ttlMs - DEFAULT_LEASE_TIMING.marginMs).toBeGreaterThanOrEqual(1.5 * gap);
  // A retry is never slower than a renewal.
  expect(leaderLossGapMs(100)).toBe(100 + WITNESS_ELECTION_MAX_MS + 100);
});
