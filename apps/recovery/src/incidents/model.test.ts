import { expect, test } from "bun:test";
import { durations, fmtDuration, fmtMicros, mergeTimeline } from "./model.ts";

test("MTTR is start to end, and detection to recovery apart; null while a time is unknown", () => {
  const d = durations({
    startedAt: "2026-12-06T10:00:00.000Z",
    detectedAt: "2026-12-06T10:00:13.000Z",
    recoveredAt: "2026-12-06T10:00:20.500Z",
    endedAt: "2026-12-06T10:01:00.000Z",
  });
  expect(d).toEqual({ mttrMs: 60_000, detectToRecoverMs: 7500, detectMs: 13_000 });
  expect(
    durations({ startedAt: "2026-12-06T10:00:00.000Z", detectedAt: null, recoveredAt: null, endedAt: null }),
  ).toEqual({ mttrMs: null, detectToRecoverMs: null, detectMs: null });
});

test("a timeline merges two sightings in time order, each line once", () => {
  const a = [
    { at: "2026-12-06T10:00:02.000Z", source: "x", what: "b" },
    { at: "2026-12-06T10:00:01.000Z", source: "x", what: "a" },
  ];
  const b = [
    { at: "2026-12-06T10:00:01.000Z", source: "x", what: "a" },
    { at: "2026-12-06T10:00:03.000Z", source: "y", what: "c" },
  ];
  expect(mergeTimeline(a, b).map((e) => e.what)).toEqual(["a", "b", "c"]);
});

test("durations and money read as people write them", () => {
  expect(fmtDuration(null)).toBe("–");
  expect(fmtDuration(1234)).toBe("1.2 s");
  expect(fmtDuration(185_000)).toBe("3 min 05 s");
  expect(fmtDuration(7_440_000)).toBe("2 h 04 min");
  expect(fmtMicros(2900)).toBe("$0.00290");
  expect(fmtMicros(null)).toBe("–");
});
