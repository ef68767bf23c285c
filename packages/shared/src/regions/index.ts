export { type Fence, watchFence } from "./fence.ts";
export { homeRegionOf, homeRegionVariants, parseRegions, withHomeRegion } from "./home.ts";
export {
  DEFAULT_LEASE_RENEW_MS,
  DEFAULT_LEASE_TIMING,
  LEASE_RETRY_MS,
  Lease,
  type LeaseTiming,
  LeaseView,
  leaderLossGapMs,
  maySubmit,
  type Observed,
  type OtherAction,
  type OwnAction,
  otherLeaseAction,
  ownLeaseAction,
  validUntil,
  WITNESS_ELECTION_MAX_MS,
} from "./lease.ts";
export {
  entryChanged,
  type PlanDecision,
  PlanEntry,
  PlanRecord,
  planKey,
  planShare,
  type RegionUse,
  released,
  withEntry,
} from "./plan.ts";
