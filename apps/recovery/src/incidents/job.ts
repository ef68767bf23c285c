// The detector as a job of the recovery service (service.ts runs it every INCIDENT_TICK_MS), and
// the lease keeper's adoption wrapped so a takeover records its failover with the tasks it adopted.
import { type KV, Kvm } from "@nats-io/kv";
import { openRegionBucket, openWorkersBucket } from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";
import type postgres from "postgres";
import { groupsReader } from "../adapters/fair-share-groups.ts";
import type { RecoveryConfig } from "../config.ts";
import type { RecoveryContext } from "../context.ts";
import { type AdoptReport, adoptRegion } from "../regions/adopt.ts";
import { createDetector } from "./detector.ts";
import type { Observation } from "./model.ts";
import { recordAdoption } from "./record.ts";

/** How often the detector reads its sources. */
export const INCIDENT_TICK_MS = 5000;

/** The detector's tick, its sources opened from the service's connection (the rollout bucket: opened, never created). */
export async function incidentJob(
  config: RecoveryConfig,
  ctx: RecoveryContext,
  log: Logger,
  onOpened?: (o: Observation, id: number) => void,
): Promise<() => Promise<unknown>> {
  const remotes = config.regions.filter((r) => r !== config.REGION);
  let control: KV | undefined;
  const detector = createDetector({
    sql: ctx.database.sql,
    region: config.REGION,
    log,
    rolloutControl: async () => (control ??= await new Kvm(ctx.nc).open("rollout_control").catch(() => undefined)),
    ...(remotes.length ? { regionKv: await openRegionBucket(ctx.nc, config.REGION) } : {}),
    leaseStillMs: config.LEASE_TTL_MS + config.LEASE_MARGIN_MS,
    breakerMinOpenMs: config.BREAKER_STORM_MS,
    ...(onOpened ? { onOpened } : {}),
    events: { js: ctx.js, jsm: ctx.jsm, workersKv: await openWorkersBucket(ctx.nc, config.REGION) },
  });
  return () => detector.tick();
}

/**
 * The lease keeper's `adopt`: adoptRegion (regions/adopt.ts), then the failover incident of that
 * phase recorded (best effort: an incident not written is logged, the adoption's result stands).
 */
export function adoptAndRecord(
  config: Pick<RecoveryConfig, "REGION" | "PUBLISH_DEADLINE_MS" | "LEASE_TTL_MS" | "LEASE_MARGIN_MS">,
  ctx: Pick<RecoveryContext, "js" | "jsm" | "database">,
  replicaSql: postgres.Sql,
  log: Logger,
) {
  const groups = groupsReader(ctx.jsm, config.REGION, log);
  return async (remote: string, epoch: number, phase: "resumable" | "all"): Promise<AdoptReport> => {
    const takenOverAt = Date.now();
    const r = await adoptRegion(
      {
        sql: replicaSql,
        js: ctx.js,
        local: config.REGION,
        log,
        publishDeadlineMs: config.PUBLISH_DEADLINE_MS,
        groupOf: await groups(),
      },
      remote,
      epoch,
      phase,
    );
    await recordAdoption(ctx.database.sql, {
      local: config.REGION,
      remote,
      epoch,
      takenOverAt,
      adoptedAt: Date.now(),
      stillMs: config.LEASE_TTL_MS + config.LEASE_MARGIN_MS,
      adopted: { phase, count: r.adopted, withProviderId: r.withProviderId },
    }).catch((err: Error) => log.error({ err: err.message, remote }, "failover incident not recorded"));
    return r;
  };
}
