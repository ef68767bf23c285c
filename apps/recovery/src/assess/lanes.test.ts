import { expect, test } from "bun:test";
import { laneState, recordOf } from "../lanes/model.ts";
import { laneChecks } from "./lanes.ts";

const now = new Date("2026-12-06T14:00:00.000Z");

test("assess: a paused lane is a warning naming who and since when; a running lane says nothing; an unreadable record fails", () => {
  const paused = laneState(
    "normal",
    { record: recordOf({ lane: "normal", reason: "incident" }, true, "console:ops", now) },
    [],
    now.getTime(),
  );
  const running = laneState("high", { record: null }, [], now.getTime());
  const broken = laneState("low", { error: "lane.low: not JSON" }, [], now.getTime());
  const checks = laneChecks([running, paused, broken]);
  expect(checks.map((c) => [c.name, c.level])).toEqual([
    ["lane", "warn"],
    ["lane", "fail"],
  ]);
  expect(checks[0]!.summary).toContain(
    "normal PAUSED by ops via console since 2026-12-06 14:00:00 UTC, until resumed: incident",
  );
  expect(checks[0]!.hint).toContain("lanes resume normal");
  expect(laneChecks([running])).toEqual([]);
  expect(laneChecks(new Error("no NATS"))[0]!.level).toBe("warn");
});
