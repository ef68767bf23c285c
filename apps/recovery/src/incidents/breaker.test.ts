import { expect, test } from "bun:test";
import { breakerTracker } from "./breaker.ts";

const ev = (at: number, worker: string, state: string, keyRef = "key_a") => ({
  at: new Date(at).toISOString(),
  data: { keyRef, state, worker, reason: state === "open" ? "5 of 6 calls failed" : null },
});
const T = Date.parse("2026-12-06T10:00:00.000Z");

test("a breaker open shorter than the minute is no incident", () => {
  const t = breakerTracker(60_000);
  t.add(1, ev(T, "w1", "open"));
  t.add(2, ev(T + 30_000, "w1", "closed"));
  expect(t.observations("fsn1", T + 120_000)).toEqual([]);
});

test("an account's episode spans its solvers: from the first open to the last close; detected at one minute", () => {
  const t = breakerTracker(60_000);
  t.add(7, ev(T, "w1", "open"));
  t.add(8, ev(T + 5000, "w2", "open"));
  t.add(9, ev(T + 20_000, "w1", "half_open"));
  t.add(10, ev(T + 40_000, "w1", "closed"));
  // Still open at w2 after 61 s: an open incident.
  const open = t.observations("fsn1", T + 61_000);
  expect(open).toHaveLength(1);
  expect(open[0]).toMatchObject({
    key: "breaker:key_a:7",
    startedAt: new Date(T).toISOString(),
    detectedAt: new Date(T + 60_000).toISOString(),
  });
  expect(open[0]!.endedAt).toBeUndefined();
  t.add(11, ev(T + 90_000, "w2", "closed"));
  const [closed] = t.observations("fsn1", T + 95_000);
  expect(closed!.endedAt).toBe(new Date(T + 90_000).toISOString());
  expect(closed!.detail).toEqual({ keyRef: "key_a", workers: 2 });
  // Another account is its own episode.
  t.add(12, ev(T + 100_000, "w1", "open", "key_b"));
  expect(t.observations("fsn1", T + 100_000 + 61_000).map((o) => o.key)).toEqual([
    "breaker:key_a:7",
    "breaker:key_b:12",
  ]);
});

test("a solver gone with its breaker open no longer holds the episode open", () => {
  const t = breakerTracker(60_000);
  t.add(1, ev(T, "w1", "open"));
  t.prune(new Set(["w2"]), T + 70_000);
  const [o] = t.observations("fsn1", T + 71_000);
  expect(o!.endedAt).toBe(new Date(T + 70_000).toISOString());
  expect(o!.timeline.at(-1)!.what).toBe("w1 has no heartbeat any more");
});

test("anyOpen: only while some worker's breaker is open", () => {
  const t = breakerTracker(60_000);
  expect(t.anyOpen()).toBe(false);
  t.add(1, ev(T, "w1", "open"));
  expect(t.anyOpen()).toBe(true);
  t.add(2, ev(T + 1000, "w1", "closed"));
  expect(t.anyOpen()).toBe(false);
});
