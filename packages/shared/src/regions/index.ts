export { type Fence, watchFence } from "./fence.ts";
export { homeRegionOf, homeRegionVariants, parseRegions, withHomeRegion } from "./home.ts";
export {
  DEFAULT_LEASE_TIMING,
  Lease,
  type LeaseTiming,
  LeaseView,
  maySubmit,
  type Observed,
  type OtherAction,
  type OwnAction,
  otherLeaseAction,
  ownLeaseAction,
  validUntil,
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
