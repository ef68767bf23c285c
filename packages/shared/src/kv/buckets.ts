// Opening a region's KV buckets: bound when they exist (the apps), created when missing (the
// administering roles). The names come from @pipeline/shared/subjects (`buckets`).
import { jetstreamManager } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { type RequireOptions, requireStreams } from "../nats/topology.ts";
import { buckets } from "../subjects.ts";

/** Revisions kept per config key (the rollback horizon). */
export const CONFIG_HISTORY = 64;

/**
 * An existing bucket, opened without creating it (what the apps do: their NATS users may not
 * create or change a bucket; provision.ts creates them). Reads its stream's info once
 * (STREAM.INFO), waiting up to `o.waitMs` for it, then throws a TopologyMissingError naming the
 * bucket.
 */
export async function bindBucket(nc: NatsConnection, bucket: string, o: RequireOptions = {}): Promise<KV> {
  const [info] = await requireStreams(await jetstreamManager(nc), [`KV_${bucket}`], {
    label: () => `KV bucket ${bucket} (stream KV_${bucket})`,
    ...o,
  });
  return new Kvm(nc).open(bucket, { allow_direct: info!.config.allow_direct === true });
}

/** The region's own bucket: `lease` (LeaseView) and `adopted.<remote>` (the epoch adopted); created when missing (administering roles). */
export async function openRegionBucket(nc: NatsConnection, region: string): Promise<KV> {
  return new Kvm(nc).create(buckets.region(region), { history: 1 });
}

/** The region's config bucket (created on first use, with history: administering roles). */
export async function openConfigBucket(nc: NatsConnection, region: string): Promise<KV> {
  return new Kvm(nc).create(buckets.config(region), { history: CONFIG_HISTORY });
}
