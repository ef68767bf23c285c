// Chaos on a 3-node NATS cluster: the witness as production runs it, one node per location (in
// fsn1's and hel1's network namespaces and in nbg1's), routes over the inter-region links (30 ms
// relays), the leases bucket with 3 replicas, the recovery service's default lease timing
// (DEFAULT_LEASE_TIMING: TTL 20 s, margin 3 s, renewed every 1 s). Under load through both regions,
// with each region's lease view (what its solvers and gateway obey) watched as it changes:
// 1. a node that only follows the leases stream is killed -9: the other two keep the quorum, the
//    renewals go on (no gap of half TTL − margin), no region refuses a task, no lease moves.
// 2. the node leading the leases stream is killed -9: renewals stop until the other two elect a
//    leader (measured, printed in the `[witness]` line); the longest renewal gap stays below
//    TTL − margin, so no region refuses a single task, and no lease moves.
// 3. fsn1 is cut off (its inter-region link down). Its keeper still reaches the witness node in its
//    own location, which alone has no quorum: fsn1 fences itself and hel1 takes fsn1's lease over
//    through the two other nodes. After the heal fsn1 reclaims it; every task completes, paid once.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsServerHandle } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import { DEFAULT_LEASE_RENEW_MS, DEFAULT_LEASE_TIMING, Lease, LeaseView } from "@pipeline/shared/regions";
import { buckets } from "@pipeline/shared/subjects";
import { withDiagnosis } from "./support/stack-diagnosis.ts";
import { call, type Region, steadyLoad, turnstile } from "./support/two-regions.ts";
import { type NetnsTwoRegions, startTwoRegionsNetns } from "./support/two-regions-netns.ts";

const SITES = ["nbg1", "fsn1", "hel1"] as const;
let two: NetnsTwoRegions;
let nc: NatsConnection;
let jsm: JetStreamManager;
/** When a silent region's solvers stop: the longest renewal gap a region survives. */
const TTL_MINUS_MARGIN = DEFAULT_LEASE_TIMING.ttlMs - DEFAULT_LEASE_TIMING.marginMs;

beforeAll(async () => {
  two = await startTwoRegionsNetns({
    witnessNodes: 3,
    emulator: { latencyMs: 500 },
    // The recovery service's own defaults (apps/recovery/src/config.ts), not a test's timing.
    leaseTtlMs: DEFAULT_LEASE_TIMING.ttlMs,
    leaseMarginMs: DEFAULT_LEASE_TIMING.marginMs,
    leaseRenewMs: DEFAULT_LEASE_RENEW_MS,
    adoptUncertainMs: 60_000,
  });
  // The test reads the witness through nbg1's and hel1's nodes (on the majority side of the cut below).
  nc = await connectNats(
    `${two.witnessNodes[0]!.url},${two.witnessNodes[2]!.url}`,
    "witness-chaos-test",
    two.witness.auth("recovery"),
  );
  jsm = await jetstreamManager(nc, { timeout: 2000 });
}, 90_000);
afterAll(async () => {
  await nc?.close();
  await two?.stop();
});

async function leaseOf(region: string): Promise<Lease | undefined> {
  const kv = await new Kvm(jetstream(nc, { timeout: 2000 })).open(buckets.leases());
  const e = await kv.get(`lease.${region}`);
  return e?.operation === "PUT" ? Lease.parse(e.json()) : undefined;
}

const leasesStream = async () => (await jsm.streams.info(`KV_${buckets.leases()}`)).cluster;
/** The node leading the leases stream. */
async function leader(): Promise<{ site: string; node: NatsServerHandle }> {
  const name = (await eventually(async () => (await leasesStream())?.leader, 20_000, 250))!;
  const i = SITES.findIndex((s) => name === `witness-${s}`);
  return { site: SITES[i]!, node: two.witnessNodes[i]! };
}
/** Both followers of the leases stream current again (after a node came back). */
const allCurrent = () =>
  eventually(
    async () => {
      const c = await leasesStream();
      return c?.replicas?.length === 2 && c.replicas.every((r) => r.current);
    },
    30_000,
    250,
  );

/** The probes' accepted tasks (each paid once like the load's). */
const probed: string[] = [];
/** Submits one task to a region's gateway: its status (202 accepted, 503 fenced). */
async function probe(r: Region, key: string): Promise<number> {
  const res = await call<{ id: string }>(r, "/v1/tasks", { method: "POST", body: turnstile(key) });
  if (res.status === 202) probed.push(res.body.id);
  return res.status;
}

/** Probes both regions every 250 ms for `ms`, or until `done()` once `ms` has passed: when each was turned away. */
async function probeFor(ms: number, tag: string, done: () => boolean = () => true, maxMs = ms) {
  const [fsn1, hel1] = two.regions;
  const t0 = Date.now();
  const refused: Record<string, number[]> = { fsn1: [], hel1: [] };
  const other: number[] = [];
  for (let i = 0; Date.now() - t0 < ms || (!done() && Date.now() - t0 < maxMs); i++) {
    for (const r of [fsn1, hel1]) {
      const s = await probe(r, `${tag}-${r.name}-${i}`);
      if (s === 503) refused[r.name]!.push(Date.now() - t0);
      else if (s !== 202) other.push(s);
    }
    await Bun.sleep(250);
  }
  return { refused, other };
}

type Renewal = { renewedAt: number; seenAt: number };
/**
 * Each region's lease view as its solvers and gateway read it (KV `region_<r>`, key `lease`),
 * watched through the region's own NATS: each renewal (its validUntil − (TTL − margin)) and when
 * it arrived (a stalled test process only makes that later: the gaps err long).
 */
async function watchViews() {
  const seen: Record<string, Renewal[]> = { fsn1: [], hel1: [] };
  const conns: NatsConnection[] = [];
  const watches: { stop(): void }[] = [];
  for (const r of two.regions) {
    const c = await connectNats(r.nats.url, `witness-chaos-view-${r.name}`, r.nats.auth("recovery"));
    conns.push(c);
    const w = await (await new Kvm(jetstream(c)).open(buckets.region(r.name))).watch({ key: "lease" });
    watches.push(w);
    void (async () => {
      for await (const e of w) {
        const v = e.operation === "PUT" ? LeaseView.safeParse(e.json()) : undefined;
        const renewedAt = v?.success && v.data.holder === r.name ? v.data.validUntil - TTL_MINUS_MARGIN : 0;
        if (renewedAt > (seen[r.name]!.at(-1)?.renewedAt ?? 0)) seen[r.name]!.push({ renewedAt, seenAt: Date.now() });
      }
    })();
  }
  return {
    seen,
    /** The first renewal made after `t`. */
    after: (r: string, t: number) => seen[r]!.find((x) => x.renewedAt > t),
    /**
     * The longest a region's view went without a renewal within [from, to]: from one renewal to
     * the arrival of the next (the last one: to `to`). The region is fenced when it reaches TTL − margin.
     */
    longestGap(r: string, from: number, to: number): number {
      const list = seen[r]!.filter((x) => x.seenAt <= to);
      const start = list.findLastIndex((x) => x.renewedAt <= from);
      if (start < 0) return Number.POSITIVE_INFINITY;
      let gap = 0;
      for (let i = start; i < list.length; i++) gap = Math.max(gap, (list[i + 1]?.seenAt ?? to) - list[i]!.renewedAt);
      return gap;
    },
    async stop() {
      for (const w of watches) w.stop();
      for (const c of conns) await c.close();
    },
  };
}

test(
  "3-node witness across the three locations: a follower lost fences nobody, a leader lost moves no lease, a cut-off region cannot renew through its own node",
  () =>
    withDiagnosis(
      () => two.diagnose(),
      async () => {
        const [fsn1, hel1] = two.regions;
        const info = await jsm.streams.info(`KV_${buckets.leases()}`);
        expect(info.config.num_replicas).toBe(3);
        expect(info.cluster?.replicas?.length).toBe(2);
        const epochs = { fsn1: (await leaseOf("fsn1"))!.epoch, hel1: (await leaseOf("hel1"))!.epoch };
        const load = steadyLoad([fsn1, hel1], 10, "witness-chaos");
        await Bun.sleep(3000);

        const renewals = await watchViews();
        await eventually(async () => renewals.seen.fsn1!.length > 1 && renewals.seen.hel1!.length > 1, 10_000, 100);

        // 1. A follower killed -9: the leader keeps its quorum, the renewals go on, nothing changes.
        const lead = await leader();
        const followerSite = SITES.find((s) => s !== lead.site)!;
        const follower = two.witnessNodes[SITES.indexOf(followerSite)]!;
        const followerKilledAt = Date.now();
        await follower.kill();
        const p1 = await probeFor(10_000, "follower-down");
        const gaps1 = { fsn1: 0, hel1: 0 };
        for (const r of ["fsn1", "hel1"] as const) gaps1[r] = renewals.longestGap(r, followerKilledAt, Date.now());
        expect(p1).toEqual({ refused: { fsn1: [], hel1: [] }, other: [] });
        // Renewals go on (a keeper whose own node died reconnects to nbg1's within seconds): no gap
        // of half TTL − margin, which renewals stopped for the whole 10 s would exceed.
        expect(Math.max(gaps1.fsn1, gaps1.hel1)).toBeLessThan(TTL_MINUS_MARGIN / 2);
        expect(await leaseOf("fsn1")).toMatchObject({ holder: "fsn1", epoch: epochs.fsn1 });
        expect(await leaseOf("hel1")).toMatchObject({ holder: "hel1", epoch: epochs.hel1 });
        await follower.start();
        await allCurrent();

        // 2. The leader killed -9: renewals wait for an election, and with the default timing the
        // longest gap stays below TTL − margin: no region is fenced, not for one probe. No lease
        // moves (a takeover needs TTL + margin of silence).
        // From steady renewals (three in a row since the follower came back), so that the gap measured is the election's.
        const steadyFrom = Date.now();
        await eventually(
          async () =>
            ["fsn1", "hel1"].every((r) => renewals.seen[r]!.filter((x) => x.renewedAt > steadyFrom).length >= 3),
          30_000,
          100,
        );
        const lead2 = await leader();
        const killedAt = Date.now();
        await lead2.node.kill();
        let elected: number | undefined;
        const resumed = () =>
          elected !== undefined && ["fsn1", "hel1"].every((r) => renewals.after(r, killedAt) !== undefined);
        // Probed until a leader was seen and both regions renewed again, and 1 s more (at most
        // TTL − margin + 3 s: a gap that long would have fenced them).
        let resumedAt: number | undefined;
        const probing = probeFor(
          2000,
          "leader-down",
          () => resumedAt !== undefined && Date.now() - resumedAt >= 1000,
          TTL_MINUS_MARGIN + 3000,
        );
        elected = await eventually(
          async () => {
            const c = await leasesStream().catch(() => undefined);
            return c?.leader && c.leader !== `witness-${lead2.site}` ? Date.now() : undefined;
          },
          TTL_MINUS_MARGIN + 3000,
          100,
        );
        await eventually(async () => resumed(), TTL_MINUS_MARGIN + 3000, 100).catch(() => undefined);
        resumedAt = Date.now();
        const p2 = await probing;
        const probedUntil = Date.now();
        const electionS = (elected - killedAt) / 1000;
        const resumedS = (r: string) => {
          const x = renewals.after(r, killedAt);
          return x ? ((x.seenAt - killedAt) / 1000).toFixed(1) : "never";
        };
        const gaps2 = { fsn1: 0, hel1: 0 };
        for (const r of ["fsn1", "hel1"] as const) gaps2[r] = renewals.longestGap(r, killedAt, probedUntil);
        const worstGap = Math.max(gaps2.fsn1, gaps2.hel1);
        console.log(
          `[witness] leader ${lead2.site} killed -9: new leader after ${electionS.toFixed(1)} s (polled); renewals again after ` +
            `fsn1 ${resumedS("fsn1")} s, hel1 ${resumedS("hel1")} s; longest renewal gap fsn1 ${(gaps2.fsn1 / 1000).toFixed(1)} s, ` +
            `hel1 ${(gaps2.hel1 / 1000).toFixed(1)} s, TTL − margin ${TTL_MINUS_MARGIN / 1000} s (${(TTL_MINUS_MARGIN / worstGap).toFixed(1)} × the gap); ` +
            `refused probes fsn1 ${p2.refused.fsn1!.length}, hel1 ${p2.refused.hel1!.length}`,
        );
        await renewals.stop();
        expect(worstGap).toBeLessThan(TTL_MINUS_MARGIN);
        // Zero fence: not one task turned away by either region while the witness elected a leader.
        expect(p2).toEqual({ refused: { fsn1: [], hel1: [] }, other: [] });
        expect(await leaseOf("fsn1")).toMatchObject({ holder: "fsn1", epoch: epochs.fsn1 });
        expect(await leaseOf("hel1")).toMatchObject({ holder: "hel1", epoch: epochs.hel1 });
        await lead2.node.start();
        await allCurrent();

        // 3. fsn1 cut off: its own location's node is reachable to it but has no quorum.
        const cutAt = Date.now();
        await two.isolate("fsn1");
        await eventually(async () => (await probe(fsn1, `cut-${Date.now()}`)) === 503, TTL_MINUS_MARGIN + 10_000, 250);
        const fencedAfterS = (Date.now() - cutAt) / 1000;
        const taken = await eventually(
          async () => {
            const l = await leaseOf("fsn1").catch(() => undefined);
            return l?.holder === "hel1" ? l : undefined;
          },
          60_000,
          250,
        );
        const takenAfterS = (Date.now() - cutAt) / 1000;
        expect(taken.epoch).toBe(epochs.fsn1 + 1);
        expect(await probe(hel1, "while-fsn1-cut")).toBe(202);
        await two.heal();
        // fsn1 reclaims its lease once hel1's hold has been still for TTL + margin.
        const back = await eventually(
          async () => {
            const l = await leaseOf("fsn1").catch(() => undefined);
            return l?.holder === "fsn1" ? l : undefined;
          },
          75_000,
          250,
        );
        expect(back.epoch).toBe(taken.epoch + 1);
        await eventually(async () => (await probe(fsn1, `healed-${Date.now()}`)) === 202, 30_000, 250);
        await load.stop();

        // Every task acknowledged (load and probes) completes, each paid once.
        const ids = [...load.acked.map((a) => a.id), ...probed];
        await eventually(
          async () => {
            const rows = await hel1.db.sql<
              { n: number }[]
            >`select count(*)::int as n from tasks where id = any(${ids}::uuid[]) and state = 'completed'`;
            return rows[0]!.n === ids.length;
          },
          120_000,
          500,
        );
        const stats = two.emu.stats();
        console.log(
          `[witness] chaos (3 nodes, TTL ${DEFAULT_LEASE_TIMING.ttlMs / 1000} s, margin ${DEFAULT_LEASE_TIMING.marginMs / 1000} s, ${two.latencyMs} ms relays): acknowledged ${ids.length} (${probed.length} probes); ` +
            `follower ${followerSite} down 10 s: no refusal, longest renewal gap ${(Math.max(gaps1.fsn1, gaps1.hel1) / 1000).toFixed(1)} s, no lease moved; ` +
            `leader ${lead2.site} down: new leader after ${electionS.toFixed(1)} s, longest renewal gap ${(worstGap / 1000).toFixed(1)} s, no refusal, no lease moved; ` +
            `fsn1 cut off: fenced after ${fencedAfterS.toFixed(1)} s, its lease taken by hel1 (epoch ${taken.epoch}) after ${takenAfterS.toFixed(1)} s, reclaimed (epoch ${back.epoch}) after the heal; ` +
            `provider submissions ${stats.submissions}, duplicate fingerprints ${stats.duplicateFingerprints}; ${two.eventLoop()}`,
        );
        expect(stats.duplicateFingerprints).toBe(0);
        expect(stats.submissions).toBe(ids.length);
      },
    ),
  360_000,
);
