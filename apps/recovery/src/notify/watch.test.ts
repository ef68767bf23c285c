import { expect, test } from "bun:test";
import { growthTracker, stormTracker } from "./watch.ts";

test("a storm is an account every live solver reports not closed for the whole stormMs; told once", () => {
  const t = stormTracker(60_000);
  const both = (a: string, b: string) => [
    { keyRef: "acct1", breaker: a },
    { keyRef: "acct1", breaker: b },
  ];
  expect(t.observe(both("open", "closed"), 0)).toEqual([]);
  // One solver's own trouble is not a storm, however long.
  expect(t.observe(both("open", "closed"), 120_000)).toEqual([]);
  expect(t.observe(both("open", "half_open"), 130_000)).toEqual([]);
  expect(t.observe(both("half_open", "open"), 189_999)).toEqual([]);
  expect(t.observe(both("open", "open"), 190_000)).toEqual([{ keyRef: "acct1", since: 130_000 }]);
  expect(t.observe(both("open", "open"), 250_000)).toEqual([]);
  // Closed, then open again: a new storm with its own start.
  expect(t.observe(both("closed", "closed"), 260_000)).toEqual([]);
  expect(t.observe(both("open", "open"), 270_000)).toEqual([]);
  expect(t.observe(both("open", "open"), 330_000)).toEqual([{ keyRef: "acct1", since: 270_000 }]);
});

test("accounts are tracked apart; one no solver reports any more is forgotten", () => {
  const t = stormTracker(1000);
  t.observe(
    [
      { keyRef: "a", breaker: "open" },
      { keyRef: "b", breaker: "open" },
    ],
    0,
  );
  expect(t.observe([{ keyRef: "a", breaker: "open" }], 500)).toEqual([]);
  expect(
    t.observe(
      [
        { keyRef: "a", breaker: "open" },
        { keyRef: "b", breaker: "open" },
      ],
      1000,
    ),
  ).toEqual([{ keyRef: "a", since: 0 }]);
  expect(t.observe([{ keyRef: "b", breaker: "open" }], 2000)).toEqual([{ keyRef: "b", since: 1000 }]);
});

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
