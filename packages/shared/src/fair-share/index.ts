export { type FairShareRead, pollFairShare, readFairShare } from "./read.ts";
export {
  FAIR_SHARE_KEY,
  FairShare,
  FairShareGroup,
  type FairShareView,
  fairShareView,
  GroupName,
  parseFairShare,
} from "./record.ts";
