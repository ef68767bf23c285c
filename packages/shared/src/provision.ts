// A region's NATS topology, created by the administering side (issue 34): the apps' users may not
// create or change a stream, a bucket or the notifier's consumer, so whoever administers the
// region creates them before the apps start (the recovery service at start; the dev stack, the
// test harness and the bench before they spawn the apps). The apps verify and wait
// (nats/topology.ts requireStreams, kv/buckets.ts bindBucket).
import { jetstreamManager } from "@nats-io/jetstream";
import { openConfigBucket, openRegionBucket, raiseBucketReplicas } from "./kv/buckets.ts";
import { openWorkersBucket } from "./kv/heartbeats.ts";
import { connectNats, type NatsAuth, type NatsConnection } from "./nats/connection.ts";
import {
  bodiesStreamConfig,
  ensureNotifierConsumer,
  ensureStream,
  ensureStreamPresent,
  ensureStreams,
  isNotFound,
  type TopologyOptions,
} from "./nats/topology.ts";
import { openNotifyBucket } from "./notify/claims.ts";
import { CONTROL_BUCKET } from "./rollout/store.ts";
import { openRolloutBucket } from "./shards/assignment.ts";
import { buckets, streams } from "./subjects.ts";

export interface ProvisionOptions extends TopologyOptions {
  /**
   * BODIES' retention (recovery's BODIES_MAX_AGE_MS): set when given; when not, BODIES is only
   * created if missing (with the default) and an existing one is left as it is.
   */
  bodiesMaxAgeMs?: number;
}

export interface Provisioned {
  streams: string[];
  buckets: string[];
  consumers: string[];
}

/**
 * Creates or verifies everything the apps of `o.region` use: TASKS, EVENTS, DLQ and BODIES, the
 * config, workers, region, rollout (the shard assignment) and notify buckets, and the notifier's
 * consumer on EVENTS. Streams and buckets get `o.replicas` copies; an existing one with fewer is
 * raised, never lowered (so is the rollout service's `rollout_control` when the region has it).
 * Idempotent (a second run changes nothing); needs an administering user (recovery, rollout, admin).
 */
export async function provisionRegion(nc: NatsConnection, o: ProvisionOptions): Promise<Provisioned> {
  const jsm = await jetstreamManager(nc);
  await ensureStreams(jsm, o);
  const bodies = bodiesStreamConfig({
    region: o.region,
    ...(o.replicas ? { replicas: o.replicas } : {}),
    ...(o.bodiesMaxAgeMs ? { maxAgeMs: o.bodiesMaxAgeMs } : {}),
  });
  if (o.bodiesMaxAgeMs) await ensureStream(jsm, bodies);
  else await ensureStreamPresent(jsm, bodies);
  const names = await provisionBuckets(nc, o.region, o.replicas);
  const consumers = [await ensureNotifierConsumer(jsm, o.region)];
  return {
    streams: [streams.tasks(o.region), streams.events(o.region), streams.dlq(o.region), streams.bodies(o.region)],
    buckets: names,
    consumers,
  };
}

/** The region's buckets, created with `replicas` copies when missing, raised to them when they have fewer. */
async function provisionBuckets(nc: NatsConnection, region: string, replicas?: number): Promise<string[]> {
  await Promise.all([
    openConfigBucket(nc, region, replicas),
    openWorkersBucket(nc, region, replicas),
    openRegionBucket(nc, region, replicas),
    openRolloutBucket(nc, region, replicas),
    openNotifyBucket(nc, region, undefined, replicas),
  ]);
  const names = [
    buckets.config(region),
    buckets.workers(region),
    buckets.region(region),
    buckets.rollout(region),
    buckets.notify(region),
  ];
  if (!replicas || replicas < 2) return names;
  for (const b of names) await raiseBucketReplicas(nc, b, replicas);
  // The rollout record's bucket belongs to the rollout service (its home region only, created at
  // its first start): raised when it is here, never created.
  const control = await raiseBucketReplicas(nc, CONTROL_BUCKET, replicas).then(
    () => true,
    (err) => {
      if (isNotFound(err)) return false;
      throw err;
    },
  );
  return control ? [...names, CONTROL_BUCKET] : names;
}

/** provisionRegion for each region, over a connection of its own as `auth` (an administering user), closed after. */
export async function provisionRegionsAt(
  url: string,
  auth: NatsAuth,
  regions: string[],
  o: Omit<ProvisionOptions, "region"> = {},
): Promise<void> {
  const nc = await connectNats(url, "provision", auth);
  try {
    for (const region of regions) await provisionRegion(nc, { ...o, region });
  } finally {
    await nc.close();
  }
}
