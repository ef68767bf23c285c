// The region figures as Prometheus gauges, from the same probe `assess` reads (assess/regions.ts):
// whether this region may submit (its lease), how long the lease is valid, its epoch, and for each
// other region the mirror's lag, its last activity and the replicator's backlog. Pure (region-gauges.test.ts).
import { maySubmit } from "@pipeline/shared/regions";
import type { RegionsProbe } from "../assess/regions.ts";

export interface RegionGauge {
  name:
    | "recovery_region_may_submit"
    | "recovery_region_lease_valid_seconds"
    | "recovery_region_lease_epoch"
    | "recovery_region_mirror_lag_messages"
    | "recovery_region_mirror_idle_seconds"
    | "recovery_region_replica_pending"
    | "recovery_region_plan_share_threads";
  labels: Record<string, string>;
  value: number;
}

export function regionGauges(p: RegionsProbe): RegionGauge[] {
  const out: RegionGauge[] = [];
  const region = { region: p.local };
  if (!(p.lease instanceof Error)) {
    out.push({
      name: "recovery_region_may_submit",
      labels: region,
      value: p.lease && maySubmit(p.lease, p.local, p.now) ? 1 : 0,
    });
    if (p.lease) {
      out.push({
        name: "recovery_region_lease_valid_seconds",
        labels: { ...region, holder: p.lease.holder },
        value: Math.round((p.lease.validUntil - p.now) / 100) / 10,
      });
      out.push({
        name: "recovery_region_lease_epoch",
        labels: { ...region, holder: p.lease.holder },
        value: p.lease.epoch,
      });
    }
  } else out.push({ name: "recovery_region_may_submit", labels: region, value: 0 });
  for (const m of p.mirrors) {
    if ("error" in m) continue;
    const labels = { region: p.local, remote: m.remote };
    out.push({ name: "recovery_region_mirror_lag_messages", labels, value: m.lag });
    if (m.activeMs !== null)
      out.push({ name: "recovery_region_mirror_idle_seconds", labels, value: Math.round(m.activeMs / 100) / 10 });
    if (m.replicaPending !== null)
      out.push({ name: "recovery_region_replica_pending", labels, value: m.replicaPending });
  }
  // This region's share of each provider account's plan; 0 once it lapsed (its solvers start nothing).
  if (Array.isArray(p.shares))
    for (const s of p.shares)
      out.push({
        name: "recovery_region_plan_share_threads",
        labels: { region: p.local, key_ref: s.keyRef },
        value: s.validS > 0 ? s.threads : 0,
      });
  return out;
}
