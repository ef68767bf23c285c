import { expect, test } from "bun:test";
import { growthTracker } from "./watch.ts";

test("DLQ growth: the threshold within the window is told once, then counting starts over", () => {
  const g = growthTracker(50, 600_000);
  expect(g.observe(100, 0)).toBeUndefined();
  expect(g.observe(149, 60_000)).toBeUndefined();
  expect(g.observe(150, 120_000)).toEqual({ fromSeq: 101, grew: 50 });
  expect(g.observe(160, 180_000)).toBeUndefined();
  // Slow growth never adds up to a message: readings older than the window are dropped.
  const slow = growthTracker(50, 600_000);
  for (let i = 0; i <= 30; i++) expect(slow.observe(1000 + i * 10, i * 300_000)).toBeUndefined();
  // A purged stream (sequence lower than before) starts over from its new sequence.
  const p = growthTracker(10, 600_000);
  p.observe(500, 0);
  expect(p.observe(3, 1000)).toBeUndefined();
  expect(p.observe(13, 2000)).toEqual({ fromSeq: 4, grew: 10 });
});
