import { expect, test } from "bun:test";
import { regionGauges } from "./region-gauges.ts";
import { createRecoveryMetrics } from "./registry.ts";

const now = 1_800_000_000_000;

test("a region holding its lease may submit; its lease's validity and epoch, and each mirror's lag, idle time and backlog, are gauges", () => {
  const g = regionGauges({
    local: "fsn1",
    now,
    lease: { holder: "fsn1", epoch: 4, validUntil: now + 6500 },
    mirrors: [
      { remote: "hel1", lag: 3, activeMs: 1200, replicaPending: 7 },
      { remote: "nbg1", error: "no stream" },
    ],
  });
  expect(g).toEqual([
    { name: "recovery_region_may_submit", labels: { region: "fsn1" }, value: 1 },
    { name: "recovery_region_lease_valid_seconds", labels: { region: "fsn1", holder: "fsn1" }, value: 6.5 },
    { name: "recovery_region_lease_epoch", labels: { region: "fsn1", holder: "fsn1" }, value: 4 },
    { name: "recovery_region_mirror_lag_messages", labels: { region: "fsn1", remote: "hel1" }, value: 3 },
    { name: "recovery_region_mirror_idle_seconds", labels: { region: "fsn1", remote: "hel1" }, value: 1.2 },
    { name: "recovery_region_replica_pending", labels: { region: "fsn1", remote: "hel1" }, value: 7 },
  ]);
});

test("a lease taken over by the other region, a lapsed one, or none at all: may_submit is 0", () => {
  const base = { local: "fsn1", now, mirrors: [] };
  expect(regionGauges({ ...base, lease: { holder: "hel1", epoch: 5, validUntil: now + 9000 } })[0]!.value).toBe(0);
  expect(regionGauges({ ...base, lease: { holder: "fsn1", epoch: 4, validUntil: now - 1 } })[0]!.value).toBe(0);
  expect(regionGauges({ ...base, lease: undefined })).toEqual([
    { name: "recovery_region_may_submit", labels: { region: "fsn1" }, value: 0 },
  ]);
  expect(regionGauges({ ...base, lease: new Error("unreadable") })[0]!.value).toBe(0);
});

test("the recovery service's /metrics carries them, read at scrape time", async () => {
  let epoch = 1;
  const m = createRecoveryMetrics({
    regions: async () =>
      regionGauges({
        local: "fsn1",
        now,
        lease: { holder: "fsn1", epoch: epoch++, validUntil: now + 1000 },
        mirrors: [{ remote: "hel1", lag: 0, activeMs: 500, replicaPending: 0 }],
      }),
  });
  const text = await (await m.response()).text();
  expect(text).toContain('recovery_region_may_submit{region="fsn1",app="recovery"} 1');
  expect(text).toContain('recovery_region_lease_epoch{region="fsn1",holder="fsn1",app="recovery"} 1');
  expect(text).toContain('recovery_region_mirror_idle_seconds{region="fsn1",remote="hel1",app="recovery"} 0.5');
  // One probe per scrape for all six gauges (epoch 1 in each); the next scrape probes again.
  expect(text).toContain('recovery_region_lease_valid_seconds{region="fsn1",holder="fsn1",app="recovery"} 1');
  await Bun.sleep(5);
  expect(await (await m.response()).text()).toContain(
    'recovery_region_lease_epoch{region="fsn1",holder="fsn1",app="recovery"} 2',
  );
});

test("this region's share of each provider account's plan is a gauge; a lapsed share reads 0", () => {
  const g = regionGauges({
    local: "fsn1",
    now,
    lease: { holder: "fsn1", epoch: 4, validUntil: now + 6500 },
    mirrors: [],
    shares: [
      { keyRef: "key_a", threads: 4, validS: 2.5 },
      { keyRef: "key_b", threads: 3, validS: -1 },
    ],
  });
  expect(g.filter((x) => x.name === "recovery_region_plan_share_threads")).toEqual([
    { name: "recovery_region_plan_share_threads", labels: { region: "fsn1", key_ref: "key_a" }, value: 4 },
    { name: "recovery_region_plan_share_threads", labels: { region: "fsn1", key_ref: "key_b" }, value: 0 },
  ]);
});
