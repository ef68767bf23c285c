// A region's NATS topology, created by the administering side (issue 34): the apps' users may not
// create or change a stream, a bucket or the notifier's consumer, so whoever administers the
// region creates them before the apps start (the recovery service at start; the dev stack, the
// test harness and the bench before they spawn the apps). The apps verify and wait
// (nats/topology.ts requireStreams, kv/buckets.ts bindBucket).
import { jetstreamManager } from "@nats-io/jetstream";
import { openConfigBucket, openRegionBucket } from "./kv/buckets.ts";
import { openWorkersBucket } from "./kv/heartbeats.ts";
import { connectNats, type NatsAuth, type NatsConnection } from "./nats/connection.ts";
import {
  bodiesStreamConfig,
  ensureNotifierConsumer,
  ensureStream,
  ensureStreamPresent,
  ensureStreams,
  type TopologyOptions,
} from "./nats/topology.ts";
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
 * config, workers, region and rollout buckets, and the notifier's consumer on EVENTS.
 * Idempotent (a second run changes nothing); needs an administering user (recovery, rollout,
 * admin).
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
  await Promise.all([
    openConfigBucket(nc, o.region),
    openWorkersBucket(nc, o.region),
    openRegionBucket(nc, o.region),
    openRolloutBucket(nc, o.region),
  ]);
  const consumers = [await ensureNotifierConsumer(jsm, o.region)];
  return {
    streams: [streams.tasks(o.region), streams.events(o.region), streams.dlq(o.region), streams.bodies(o.region)],
    buckets: [buckets.config(o.region), buckets.workers(o.region), buckets.region(o.region), buckets.rollout(o.region)],
    consumers,
  };
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
