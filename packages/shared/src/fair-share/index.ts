export { type GroupOf, type RequeuedTask, requeueMessage } from "./message.ts";
export { type FairShareRead, groupsNow, pollFairShare, readFairShare } from "./read.ts";
export {
  FAIR_SHARE_KEY,
  FairShare,
  FairShareGroup,
  type FairShareView,
  fairShareView,
  GroupName,
  parseFairShare,
} from "./record.ts";
