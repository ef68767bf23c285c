// The `lane` lines of assess: a lane an operator paused is a warning (the operator did it; who and
// since when), never a failure; a lane record that cannot be read is a failure (nobody knows
// whether the lane is held).
import { describeLane, type LaneState } from "../lanes/model.ts";
import type { Check } from "./model.ts";

export function laneChecks(lanes: LaneState[] | Error): Check[] {
  if (lanes instanceof Error)
    return [{ name: "lane", level: "warn", summary: `lane pause records unreadable: ${lanes.message}` }];
  const out: Check[] = [];
  for (const l of lanes) {
    if (l.error)
      out.push({
        name: "lane",
        level: "fail",
        summary: describeLane(l),
        hint: `write the record again: bun run recovery lanes pause ${l.lane} (or resume ${l.lane})`,
      });
    else if (l.state === "paused")
      out.push({
        name: "lane",
        level: "warn",
        summary: describeLane(l),
        hint: `its tasks wait queued; bun run recovery lanes resume ${l.lane} (or the console's Lanes panel) when it should run`,
      });
  }
  return out;
}
