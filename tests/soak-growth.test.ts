// The soak's growth judge (bench/soak/growth.ts) on made-up series: no test of the runner itself
// waits for a spike to land on a stretch's end, so the rule is pinned here.
import { expect, test } from "bun:test";
import { floor, stretchedChange } from "../bench/soak/growth.ts";

test("a held count with a periodic one-sample spike does not grow; one whose floor rises does", () => {
  // The recovery service's fds in a 30-minute soak: 11, with 13 for one sample every 5 minutes,
  // which lands at a stretch's end when the kills have the same period.
  const spiky = [
    [11, 11, 11, 13],
    [11, 11, 11, 13],
    [11, 11, 11, 13],
  ];
  expect(stretchedChange(spiky, (x) => x, floor).delta).toBe(0);
  expect(stretchedChange(spiky, (x) => x).delta).toBe(3); // the median of two ends: each spike counted, +3 as measured
  const leak = [
    [11, 11, 12, 12],
    [12, 13, 13, 14],
  ];
  expect(stretchedChange(leak, (x) => x, floor)).toEqual({ from: 11, to: 13, delta: 2 });
});
