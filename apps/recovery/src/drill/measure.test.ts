import { expect, test } from "bun:test";
import { ratePerSec, recoveryMs, rpoOf } from "./measure.ts";

/** n completions per second from `from` to `to` (ms), evenly spread. */
const steady = (from: number, to: number, perSec: number) => {
  const out: number[] = [];
  for (let t = from; t < to; t += 1000 / perSec) out.push(t);
  return out;
};

test("no dip after the fault: RTO 0", () => {
  const times = steady(0, 20_000, 10);
  expect(ratePerSec(times, 0, 10_000)).toBeCloseTo(10, 5);
  expect(recoveryMs(times, { faultAt: 10_000, endAt: 20_000, baselinePerSec: 10 })).toBe(0);
});

test("a 4 s outage, then the backlog and the normal rate: RTO is the end of the last low window", () => {
  const times = [...steady(0, 10_000, 10), ...steady(10_000, 10_500, 10), ...steady(14_000, 20_000, 10)];
  expect(recoveryMs(times, { faultAt: 10_000, endAt: 20_000, baselinePerSec: 10 })).toBe(4000);
});

test("completions of tasks in flight at the fault do not hide a later outage", () => {
  // Normal for 1 s after the fault, nothing for 5 s, normal again.
  const times = [...steady(0, 11_000, 10), ...steady(16_000, 25_000, 10)];
  expect(recoveryMs(times, { faultAt: 10_000, endAt: 25_000, baselinePerSec: 10 })).toBe(6000);
});

test("still low at the end: not recovered (null)", () => {
  const times = [...steady(0, 10_000, 10), ...steady(10_000, 20_000, 2)];
  expect(recoveryMs(times, { faultAt: 10_000, endAt: 20_000, baselinePerSec: 10 })).toBeNull();
});

test("RPO counts lost, failed and unfinished acknowledged tasks; refused ones were never acknowledged", () => {
  expect(
    rpoOf({ acknowledged: 100, completed: 97, lost: 1, failed: 1, unfinished: 1, refused: 40, tokensLost: 0 }),
  ).toBe(3);
  expect(
    rpoOf({ acknowledged: 100, completed: 100, lost: 0, failed: 0, unfinished: 0, refused: 40, tokensLost: 0 }),
  ).toBe(0);
  // A task completed without its token (restored from EVENTS) is not lost: it is counted apart.
  expect(
    rpoOf({ acknowledged: 100, completed: 98, lost: 0, failed: 0, unfinished: 0, refused: 0, tokensLost: 2 }),
  ).toBe(0);
});
