// Chaos on a 3-node NATS cluster: the witness as production runs it, one node per location (in
// fsn1's and hel1's network namespaces and in nbg1's), routes over the inter-region links (30 ms
// relays), the leases bucket with 3 replicas, the production lease timing (TTL 10 s, margin 3 s).
// Under load through both regions:
// 1. a node that only follows the leases stream is killed -9: the other two keep the quorum, no
//    region is fenced for 2 × (TTL - margin), no lease moves; the node comes back and catches up.
// 2. the node leading the leases stream is killed -9: renewals stop until the other two elect a
//    leader (measured); no lease moves, and both regions accept tasks again once one is elected.
// 3. fsn1 is cut off (its inter-region link down). Its keeper still reaches the witness node in its
//    own location, which alone has no quorum: fsn1 fences itself and hel1 takes fsn1's lease over
//    through the two other nodes. After the heal fsn1 reclaims it; every task completes, paid once.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsServerHandle } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import { Lease } from "@pipeline/shared/regions";
import { buckets } from "@pipeline/shared/subjects";
import { withDiagnosis } from "./support/stack-diagnosis.ts";
import { call, type Region, steadyLoad, turnstile } from "./support/two-regions.ts";
import { type NetnsTwoRegions, startTwoRegionsNetns } from "./support/two-regions-netns.ts";

const SITES = ["nbg1", "fsn1", "hel1"] as const;
let two: NetnsTwoRegions;
let nc: NatsConnection;
let jsm: JetStreamManager;

beforeAll(async () => {
  two = await startTwoRegionsNetns({
    witnessNodes: 3,
    emulator: { latencyMs: 500 },
    leaseTtlMs: 10_000,
    leaseMarginMs: 3000,
    leaseRenewMs: 1000,
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

/** Probes both regions every 250 ms for `ms`: when each was turned away. */
async function probeFor(ms: number, tag: string) {
  const [fsn1, hel1] = two.regions;
  const t0 = Date.now();
  const refused: Record<string, number[]> = { fsn1: [], hel1: [] };
  const other: number[] = [];
  for (let i = 0; Date.now() - t0 < ms; i++) {
    for (const r of [fsn1, hel1]) {
      const s = await probe(r, `${tag}-${r.name}-${i}`);
      if (s === 503) refused[r.name]!.push(Date.now() - t0);
      else if (s !== 202) other.push(s);
    }
    await Bun.sleep(250);
  }
  return { refused, other };
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

        // 1. A follower killed -9: nothing changes for 2 × (TTL - margin).
        const lead = await leader();
        const followerSite = SITES.find((s) => s !== lead.site)!;
        const follower = two.witnessNodes[SITES.indexOf(followerSite)]!;
        await follower.kill();
        const p1 = await probeFor(14_000, "follower-down");
        expect(p1).toEqual({ refused: { fsn1: [], hel1: [] }, other: [] });
        expect(await leaseOf("fsn1")).toMatchObject({ holder: "fsn1", epoch: epochs.fsn1 });
        expect(await leaseOf("hel1")).toMatchObject({ holder: "hel1", epoch: epochs.hel1 });
        await follower.start();
        await allCurrent();

        // 2. The leader killed -9: renewals wait for an election; no lease moves (a takeover needs
        // TTL + margin of silence), and both regions take tasks again once a leader is elected.
        const lead2 = await leader();
        const killedAt = Date.now();
        await lead2.node.kill();
        const probing = probeFor(20_000, "leader-down");
        const elected = await eventually(
          async () => {
            const c = await leasesStream().catch(() => undefined);
            return c?.leader && c.leader !== `witness-${lead2.site}` ? Date.now() : undefined;
          },
          20_000,
          100,
        );
        const p2 = await probing;
        const electionS = (elected - killedAt) / 1000;
        expect(p2.other).toEqual([]);
        for (const r of ["fsn1", "hel1"]) {
          // Any refusal (a region whose view lapsed before the election ended) ends with the election.
          for (const at of p2.refused[r]!) expect(at).toBeLessThan(elected - killedAt + 3000);
        }
        expect(await leaseOf("fsn1")).toMatchObject({ holder: "fsn1", epoch: epochs.fsn1 });
        expect(await leaseOf("hel1")).toMatchObject({ holder: "hel1", epoch: epochs.hel1 });
        await lead2.node.start();
        await allCurrent();

        // 3. fsn1 cut off: its own location's node is reachable to it but has no quorum.
        const cutAt = Date.now();
        await two.isolate("fsn1");
        await eventually(async () => (await probe(fsn1, `cut-${Date.now()}`)) === 503, 20_000, 250);
        const fencedAfterS = (Date.now() - cutAt) / 1000;
        const taken = await eventually(
          async () => {
            const l = await leaseOf("fsn1").catch(() => undefined);
            return l?.holder === "hel1" ? l : undefined;
          },
          45_000,
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
          60_000,
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
        const fenced = (r: string) =>
          p2.refused[r]!.length
            ? `${r} refused ${p2.refused[r]!.length} probes (${(p2.refused[r]![0]! / 1000).toFixed(1)}-${(p2.refused[r]!.at(-1)! / 1000).toFixed(1)} s)`
            : `${r} never refused`;
        console.log(
          `witness chaos (3 nodes, TTL 10 s, margin 3 s, ${two.latencyMs} ms relays): acknowledged ${ids.length} (${probed.length} probes); follower ${followerSite} down 14 s: no refusal, no lease moved; ` +
            `leader ${lead2.site} down: new leader after ${electionS.toFixed(1)} s, ${fenced("fsn1")}, ${fenced("hel1")}, no lease moved; ` +
            `fsn1 cut off: fenced after ${fencedAfterS.toFixed(1)} s, its lease taken by hel1 (epoch ${taken.epoch}) after ${takenAfterS.toFixed(1)} s, reclaimed (epoch ${back.epoch}) after the heal; ` +
            `provider submissions ${stats.submissions}, duplicate fingerprints ${stats.duplicateFingerprints}; ${two.eventLoop()}`,
        );
        expect(stats.duplicateFingerprints).toBe(0);
        expect(stats.submissions).toBe(ids.length);
      },
    ),
  360_000,
);
