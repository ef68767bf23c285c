import { expect, test } from "bun:test";
import { laneState, recordOf } from "../lanes/model.ts";
import { createRecoveryMetrics } from "./registry.ts";

test("recovery_lane_paused is 1 for a paused lane, 0 for a running one; paused seconds only while paused", async () => {
  const at = new Date(Date.now() - 90_000);
  const m = createRecoveryMetrics({
    lanes: {
      region: "fsn1",
      read: async () => [
        laneState("high", { record: null }, [], Date.now()),
        laneState("normal", { record: recordOf({ lane: "normal" }, true, "console:ops", at) }, [], Date.now()),
        laneState("low", { error: "lane.low: not JSON" }, [], Date.now()),
      ],
    },
  });
  const text = await (await m.response()).text();
  expect(text).toContain(`recovery_lane_paused{region="fsn1",lane="high",app="recovery"} 0`);
  expect(text).toContain(`recovery_lane_paused{region="fsn1",lane="normal",app="recovery"} 1`);
  // An unreadable record is no figure (not a 0 that would read as running).
  expect(text).not.toContain(`recovery_lane_paused{region="fsn1",lane="low"`);
  const secs = Number(
    /recovery_lane_paused_seconds\{region="fsn1",lane="normal",app="recovery"\} ([\d.]+)/.exec(text)?.[1],
  );
  expect(secs).toBeGreaterThanOrEqual(90);
  expect(secs).toBeLessThan(120);
  expect(text).not.toContain(`recovery_lane_paused_seconds{region="fsn1",lane="high"`);
});
