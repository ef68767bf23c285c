// Opening a region's KV buckets: bound when they exist (the apps), created when missing (the
// administering roles), with `replicas` copies in the region's cluster (STREAM_REPLICAS); an
// existing one with fewer is raised by provision.ts. The names come from @pipeline/shared/subjects
// (`buckets`).
import { jetstreamManager } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { type RequireOptions, replicasToKeep, requireStreams } from "../nats/topology.ts";
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

/**
 * Raises the copies of an existing bucket (its stream `KV_<bucket>`) to `replicas`; never lowers
 * them (topology.ts `replicasToKeep`, the rule ensureStream applies to streams). True when it
 * changed the bucket.
 */
export async function raiseBucketReplicas(nc: NatsConnection, bucket: string, replicas: number): Promise<boolean> {
  const jsm = await jetstreamManager(nc);
  const { config } = await jsm.streams.info(`KV_${bucket}`);
  const keep = replicasToKeep(replicas, config.num_replicas);
  if (keep === config.num_replicas) return false;
  await jsm.streams.update(config.name, { ...config, num_replicas: keep });
  const back = await jsm.streams.info(config.name);
  if (back.config.num_replicas !== keep)
    throw new Error(`KV bucket ${bucket}: asked for ${keep} replicas, the server kept ${back.config.num_replicas}`);
  return true;
}

/** The region's own bucket: `lease` (LeaseView) and `adopted.<remote>` (the epoch adopted); created when missing (administering roles). */
export async function openRegionBucket(nc: NatsConnection, region: string, replicas?: number): Promise<KV> {
  return new Kvm(nc).create(buckets.region(region), { history: 1, ...(replicas ? { replicas } : {}) });
}

/** The region's config bucket (created on first use, with history: administering roles). */
export async function openConfigBucket(nc: NatsConnection, region: string, replicas?: number): Promise<KV> {
  return new Kvm(nc).create(buckets.config(region), { history: CONFIG_HISTORY, ...(replicas ? { replicas } : {}) });
}
