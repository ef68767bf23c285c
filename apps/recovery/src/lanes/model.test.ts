import { expect, test } from "bun:test";
import { PAUSED_UNTIL_RESUMED, parseLaneRecord, pauseUntilOf } from "@pipeline/shared/lanes";
import { describeLane, durationMs, laneState, parseLaneAction, recordOf, whoOf } from "./model.ts";

const now = new Date("2026-12-06T14:00:00.000Z");

test("durations: seconds to days; anything else is not one", () => {
  expect(durationMs("90s")).toBe(90_000);
  expect(durationMs("30m")).toBe(1_800_000);
  expect(durationMs("2h")).toBe(7_200_000);
  expect(durationMs("1d")).toBe(86_400_000);
  for (const bad of ["", "30", "m", "1.5h", "-1m", "1w"]) expect(durationMs(bad)).toBeUndefined();
});

test("a pause or resume as asked: each field checked and named; nothing unknown", () => {
  expect(parseLaneAction({ lane: "normal", reason: " provider down ", for: "30m" })).toEqual({
    ok: true,
    action: { lane: "normal", reason: "provider down", for: "30m" },
  });
  const bad = parseLaneAction({ lane: "urgent", for: "8d", extra: 1 });
  expect(bad.ok).toBe(false);
  if (!bad.ok) {
    expect(bad.fields.sort()).toEqual(["body", "for", "lane"].sort());
    expect(bad.error).toMatch(/lane: /);
    expect(bad.error).toMatch(/for: at most 7d/);
  }
  const zero = parseLaneAction({ lane: "low", for: "0m" });
  expect(!zero.ok && zero.error).toMatch(/for: a duration/);
  expect(parseLaneAction({ lane: "low", reason: "x".repeat(201) }).ok).toBe(false);
});

test("the record: until resumed, or for a while; the consumers' pause_until from it", () => {
  const forever = recordOf({ lane: "normal" }, true, "console:ops", now);
  expect(forever).toEqual({ lane: "normal", paused: true, by: "console:ops", at: "2026-12-06T14:00:00.000Z" });
  expect(pauseUntilOf(forever, now.getTime())).toBe(PAUSED_UNTIL_RESUMED);
  const brief = recordOf({ lane: "normal", for: "30m", reason: "r" }, true, "console:ops", now);
  expect(brief.until).toBe("2026-12-06T14:30:00.000Z");
  expect(pauseUntilOf(brief, now.getTime())).toBe(brief.until);
  expect(pauseUntilOf(brief, now.getTime() + 31 * 60_000)).toBeUndefined();
  const resumed = recordOf({ lane: "normal", for: "30m" }, false, "cli:alice@h", now);
  expect(resumed.until).toBeUndefined();
  expect(pauseUntilOf(resumed, now.getTime())).toBeUndefined();
});

test("a stored record is parsed with zod: a wrong field or another lane's record is refused, naming it", () => {
  expect(parseLaneRecord("high", JSON.stringify(recordOf({ lane: "high" }, true, "x", now))).ok).toBe(true);
  expect(parseLaneRecord("high", "{")).toEqual({ ok: false, error: "lane.high: not JSON" });
  const r = parseLaneRecord("high", JSON.stringify({ lane: "high", paused: "yes", by: "x", at: now.toISOString() }));
  expect(!r.ok && r.error).toMatch(/paused/);
  const other = parseLaneRecord("high", JSON.stringify(recordOf({ lane: "low" }, true, "x", now)));
  expect(!other.ok && other.error).toMatch(/names lane low/);
});

test("a lane's state and its line: paused by whom since when; consumers that disagree; running after a pause ended", () => {
  const rec = recordOf({ lane: "normal", reason: "provider incident" }, true, "console:ops", now);
  const c = (version: string, paused: boolean) => ({
    name: `solver_r_normal_${version}`,
    version,
    paused,
    pauseUntil: null,
  });
  const s = laneState("normal", { record: rec }, [c("v1", true), c("v2", false)], now.getTime());
  expect(s.state).toBe("paused");
  expect(s.disagree).toEqual(["solver_r_normal_v2"]);
  expect(describeLane(s)).toBe(
    "normal PAUSED by ops via console since 2026-12-06 14:00:00 UTC, until resumed: provider incident (2 consumers; not yet enforced on solver_r_normal_v2)",
  );
  const ended = recordOf({ lane: "normal", for: "1m" }, true, "cli:alice@h", now);
  const later = laneState("normal", { record: ended }, [c("v1", false)], now.getTime() + 120_000);
  expect(later.state).toBe("running");
  expect(describeLane(later)).toMatch(
    /^normal running \(a pause by alice@h via cli ended at 2026-12-06 14:01:00 UTC\)/,
  );
  expect(laneState("low", { record: null }, [c("v1", true)], now.getTime()).disagree).toEqual([]);
  expect(laneState("low", { error: "lane.low: not JSON" }, [], now.getTime()).error).toBe("lane.low: not JSON");
  expect(whoOf("console:ops")).toBe("ops via console");
});
