export { type LaneRead, lanePauses, readLaneRecord, readLaneRecords } from "./read.ts";
export {
  isPausedAt,
  LaneRecord,
  laneKey,
  PAUSED_UNTIL_RESUMED,
  parseLaneRecord,
  pauseUntilOf,
} from "./record.ts";
