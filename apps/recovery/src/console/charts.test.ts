import { expect, test } from "bun:test";
import { esc, fillBuckets, fmtMs, latencyChart, niceMax, throughputChart } from "./charts.ts";

test("fillBuckets: exactly 15 minutes, oldest first, empty minutes zero", () => {
  const now = Date.UTC(2026, 11, 4, 5, 0, 30);
  const minute = Math.floor(now / 60_000);
  const b = fillBuckets(
    [
      { minute, n: 3, p50: 100, p95: 200 },
      { minute: minute - 14, n: 1, p50: 50, p95: 50 },
      { minute: minute - 20, n: 9, p50: 1, p95: 1 },
    ],
    now,
  );
  expect(b.length).toBe(15);
  expect(b[0]).toEqual({ t: (minute - 14) * 60_000, n: 1, p50: 50, p95: 50 });
  expect(b[14]).toEqual({ t: minute * 60_000, n: 3, p50: 100, p95: 200 });
  expect(b.slice(1, 14).every((x) => x.n === 0 && x.p50 === null)).toBe(true);
  expect(b.reduce((s, x) => s + x.n, 0)).toBe(4);
});

test("niceMax, fmtMs, esc", () => {
  expect([0, 1, 3, 7, 12, 250, 999].map(niceMax)).toEqual([1, 1, 5, 10, 20, 500, 1000]);
  expect([null, 12.4, 4200, 185_000].map(fmtMs)).toEqual(["–", "12 ms", "4.2 s", "3 min 5 s"]);
  expect(esc(`<a href="x">'&'</a>`)).toBe("&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
});

test("charts: labelled SVG, one bar per minute, lines broken where nothing finished", () => {
  const now = Date.UTC(2026, 11, 4, 5, 0, 0);
  const b = fillBuckets(
    [
      { minute: Math.floor(now / 60_000), n: 5, p50: 800, p95: 1500 },
      { minute: Math.floor(now / 60_000) - 1, n: 2, p50: 700, p95: 900 },
    ],
    now,
  );
  const t = throughputChart(b);
  expect(t).toContain('role="img"');
  expect(t).toContain("aria-label=");
  expect(t.match(/<rect /g)!.length).toBe(15);
  const l = latencyChart(b);
  expect(l.match(/<polyline /g)!.length).toBe(2);
  expect(l).toContain("p95");
  expect(latencyChart(fillBuckets([], now))).not.toContain("<polyline");
});
