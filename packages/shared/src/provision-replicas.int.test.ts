// A region's KV buckets on a 3-node NATS cluster: provisionRegion with replicas 3 gives the config,
// workers, region, rollout (the shard assignment) and notify buckets three copies as it does the
// streams, raises buckets an earlier one-replica provisioning made (keeping their entries; the
// rollout service's `rollout_control` too when the region has it), changes nothing on a second run,
// and an administering side configured for fewer never scales them down.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { type NatsCluster, startNatsCluster } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import { openConfigBucket } from "./kv/buckets.ts";
import { connectNats, type NatsConnection } from "./nats/connection.ts";
import { provisionRegion } from "./provision.ts";
import { CONTROL_BUCKET, openControlBucket } from "./rollout/store.ts";

const REGION = "kr";
let cluster: NatsCluster;
let nc: NatsConnection;

beforeAll(async () => {
  cluster = await startNatsCluster("kr", [REGION]);
  nc = await connectNats(cluster.handle.url, "kv-replicas-test", cluster.handle.auth("admin"));
}, 60_000);
afterAll(async () => {
  await nc?.close().catch(() => {});
  await cluster?.handle.stop().catch(() => {});
});

/** Each bucket's stream config, by bucket name. */
async function bucketConfigs(names: string[]): Promise<Record<string, { replicas: number; config: string }>> {
  const jsm = await jetstreamManager(nc);
  const out: Record<string, { replicas: number; config: string }> = {};
  for (const b of names) {
    const info = await jsm.streams.info(`KV_${b}`);
    out[b] = { replicas: info.config.num_replicas, config: JSON.stringify(info.config) };
  }
  return out;
}

test("provisioning with replicas 3 raises one-replica buckets to 3, keeps their entries, and a second run changes nothing", async () => {
  // What a region provisioned before this change has: every bucket with one copy.
  const first = await eventually(() => provisionRegion(nc, { region: REGION }).catch(() => undefined), 30_000, 500);
  expect(first.buckets).toHaveLength(5);
  expect(Object.values(await bucketConfigs(first.buckets)).map((b) => b.replicas)).toEqual([1, 1, 1, 1, 1]);
  const config = await openConfigBucket(nc, REGION);
  const rev = await config.put("solver", JSON.stringify({ revision: "before" }));
  // The rollout service's record bucket (its home region), made by that service with one copy.
  await new Kvm(nc).create(CONTROL_BUCKET, { history: 64 });

  const second = await provisionRegion(nc, { region: REGION, replicas: 3 });
  expect(second.buckets).toEqual([...first.buckets, CONTROL_BUCKET]);
  const raised = await bucketConfigs(second.buckets);
  expect(Object.values(raised).map((b) => b.replicas)).toEqual([3, 3, 3, 3, 3, 3]);
  const jsm = await jetstreamManager(nc);
  for (const b of second.buckets)
    await eventually(
      async () => ((await jsm.streams.info(`KV_${b}`)).cluster?.replicas?.length ?? 0) === 2,
      20_000,
      250,
    );
  const entry = await config.get("solver");
  expect(entry?.revision).toBe(rev);
  expect(entry?.string()).toBe(JSON.stringify({ revision: "before" }));

  // Idempotent: the same configs after a second run; an administering side with the default (1) lowers nothing.
  await provisionRegion(nc, { region: REGION, replicas: 3 });
  expect(await bucketConfigs(second.buckets)).toEqual(raised);
  await provisionRegion(nc, { region: REGION });
  expect(await bucketConfigs(second.buckets)).toEqual(raised);
}, 120_000);

test("a region provisioned with replicas 3 from scratch gets three-copy buckets (rollout_control: the one already there)", async () => {
  const p = await eventually(
    () => provisionRegion(nc, { region: `${REGION}2`, replicas: 3 }).catch(() => undefined),
    30_000,
    500,
  );
  expect(Object.values(await bucketConfigs(p.buckets)).map((b) => b.replicas)).toEqual([3, 3, 3, 3, 3, 3]);
}, 60_000);

test("the rollout service's first start after provisioning creates rollout_control with the region's replica count", async () => {
  const region = `${REGION}3`;
  await eventually(() => provisionRegion(nc, { region, replicas: 3 }).catch(() => undefined), 30_000, 500);
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(`KV_${CONTROL_BUCKET}`); // as in a region where the rollout service had not started yet
  await openControlBucket(nc, region);
  expect((await jsm.streams.info(`KV_${CONTROL_BUCKET}`)).config.num_replicas).toBe(3);
  // Without a region (a caller that names none), one copy: the old behaviour, asserted so the test can fail.
  await jsm.streams.delete(`KV_${CONTROL_BUCKET}`);
  await openControlBucket(nc);
  expect((await jsm.streams.info(`KV_${CONTROL_BUCKET}`)).config.num_replicas).toBe(1);
}, 60_000);
