// A drill on one region as production runs it: a 3-node NATS cluster with STREAM_REPLICAS=3, its
// Postgres, the emulator, a gateway, two solvers and the recovery service (tests/support/
// region-3node.ts). The region holds a solver config revision (as `recovery config set` stores it)
// and a rollout record (as `rollout start` writes it) from before its recovery service started;
// that start's provisioning gives every stream and bucket three copies. Under a steady 20 tasks/s
// through the gateway's REST API each NATS node is killed -9 in turn, and brought back once the
// config and the record read back through the two others; the next kill waits until every stream
// and bucket is current on all three. Asserted: every accepted task completes (Postgres), the
// provider is paid once per task, the config, the rollout record and the shard assignment read
// back intact after each kill. Prints `drill region-3node:` with the figures.
import { afterAll, expect, test } from "bun:test";
import { jetstreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { eventually } from "@pipeline/devstack/testing";
import { openConfigBucket, putSolverConfig, SOLVER_CONFIG_KEY } from "@pipeline/shared/kv";
import { newRollout, RolloutPlan } from "@pipeline/shared/rollout";
import { createRolloutStore, openControlBucket } from "@pipeline/shared/rollout/store";
import { openRolloutBucket, readAssignment } from "@pipeline/shared/shards";
import { buckets } from "@pipeline/shared/subjects";
import { notCaughtUp, openLoad, type Region3Node, solverTally, startRegion3Node } from "./support/region-3node.ts";
import { lastErrors, logsIn, withDiagnosis } from "./support/stack-diagnosis.ts";

const REGION = "tri";
const RATE = 20;
let r: Region3Node | undefined;
afterAll(async () => {
  await r?.stop();
});

/** What the region's KV holds before the drill, and a read of all of it (undefined while unreadable). */
async function kvRecords(s: Region3Node) {
  const configKv = await openConfigBucket(s.admin, REGION);
  const config = await putSolverConfig(configKv, {
    providerKey: "default",
    pollIntervalMs: 100,
    changedBy: "region-3node drill",
    changedAt: new Date().toISOString(),
    reason: "a revision the drill reads back after each kill",
  });
  const store = createRolloutStore(await openControlBucket(s.admin, REGION));
  const plan = RolloutPlan.parse({ version: "canary", stable: "stable", regions: [REGION], steps: [5, 100], gate: {} });
  const revision = await store.write(newRollout(plan, new Date(), "region-3node drill"), 0);
  const shards: KV = await openRolloutBucket(s.admin, REGION);
  // The shard assignment: written by the first solver that starts.
  await eventually(() => readAssignment(shards), 30_000, 200);
  // Direct gets (any current copy answers), as the solvers read their config.
  const read = async () => ({
    config: await configKv.get(SOLVER_CONFIG_KEY).then((e) => e && { revision: e.revision, value: e.string() }),
    rollout: await store.read(),
    assignment: await readAssignment(shards),
  });
  const before = await read();
  expect(before.config?.revision).toBe(config.revision);
  expect(before.rollout?.revision).toBe(revision);
  return { before, read };
}

/** The longest time without a completion in [from, to] (ms), from the completion times (sorted). */
function longestGap(done: number[], from: number, to: number): number {
  let gap = 0;
  for (let i = 1; i < done.length; i++)
    if (done[i]! >= from && done[i - 1]! <= to)
      gap = Math.max(gap, Math.min(done[i]!, to) - Math.max(done[i - 1]!, from));
  return gap;
}

/** After the load: how many of `ids` completed (waiting up to 60 s), the tasks stored, every completion time (ms). */
async function outcome(s: Region3Node, ids: string[]): Promise<{ n: number; tasks: number; done: number[] }> {
  const sql = s.region.db.sql;
  const completed = async () =>
    (
      await sql<{ n: number }[]>`select count(*)::int as n from tasks where id = any(${ids}) and state = 'completed'`
    )[0]!.n;
  await eventually(async () => (await completed()) === ids.length, 60_000, 500).catch(() => {});
  const rows = await sql<{ t: number }[]>`
    select (extract(epoch from completed_at) * 1000)::float8 as t from tasks where completed_at is not null order by 1`;
  const stored = await sql<{ tasks: number }[]>`select count(*)::int as tasks from tasks`;
  return { n: await completed(), tasks: stored[0]!.tasks, done: rows.map((x) => Number(x.t)) };
}

test("region-3node drill: each NATS node of a 3-node region killed -9 in turn under 20 tasks/s, nothing lost, paid once, KV intact", async () => {
  const t0 = Date.now();
  r = await startRegion3Node({ region: REGION, emulatorLatencyMs: 200 });
  const s = r;
  await withDiagnosis(
    () => lastErrors(logsIn(s.stack.logDir)).join("\n"),
    async () => {
      const jsm = await jetstreamManager(s.admin);
      const kv = await kvRecords(s);
      // The recovery service's provisioning raises the streams and every bucket to three copies.
      s.startRecovery();
      await eventually(async () => (await notCaughtUp(jsm, 3)).length === 0, 45_000, 250).catch(async (err) => {
        throw new Error(`${err}: ${(await notCaughtUp(jsm, 3)).join("; ")}`);
      });
      const kvNames = [buckets.config, buckets.workers, buckets.region, buckets.rollout, buckets.notify].map((b) =>
        b(REGION),
      );
      for (const b of [...kvNames, "rollout_control"])
        expect((await jsm.streams.info(`KV_${b}`)).config.num_replicas).toBe(3);

      const load = openLoad(s.region.gatewayUrl, "r3", RATE);
      await Bun.sleep(2000);
      const kills: { node: number; at: number; back: number; readMs: number }[] = [];
      for (const [i, node] of s.cluster.nodes.entries()) {
        const at = Date.now();
        await node.kill();
        // With one node of three gone: the config, the rollout record and the assignment read back as they were.
        await eventually(async () => JSON.stringify(await kv.read()) === JSON.stringify(kv.before), 20_000, 200);
        const readMs = Date.now() - at;
        await node.start();
        await eventually(async () => (await notCaughtUp(jsm, 3)).length === 0, 30_000, 250);
        expect(await kv.read()).toEqual(kv.before);
        kills.push({ node: i + 1, at, back: Date.now(), readMs });
        await Bun.sleep(1000);
      }
      await load.stop();
      const ids = [...load.accepted.keys()];
      const { n, tasks, done } = await outcome(s, ids);
      const stats = s.stack.emu!.stats();
      const errs = [...load.errors.entries()].sort((a, b) => b[1] - a[1]);
      const nErr = errs.reduce((m, [, c]) => m + c, 0);
      const tally = solverTally(s.stack.logDir);
      const gaps = kills.map((k) => (longestGap(done, k.at - 1000, k.back + 1000) / 1000).toFixed(1));
      console.log(
        `drill region-3node: accepted ${ids.length}, completed ${n}, lost ${ids.length - n}, extra paid ${stats.submissions - tasks}, ` +
          `longest completion gap around each kill ${gaps.join("/")} s, client errors ${nErr}${errs.length ? ` (${errs.map(([st, c]) => `${st || "no answer"} x${c}`).join(", ")})` : ""}, ` +
          `slowest accept ${(load.slowestMs() / 1000).toFixed(1)} s, gave up ${load.gaveUp()}, KV read back with a node down after ${kills.map((k) => (k.readMs / 1000).toFixed(1)).join("/")} s; ` +
          `solvers: events not published ${tally.eventsLost}, heartbeats not written ${tally.heartbeatsMissed}, taken for dead ${tally.declaredDead} (tasks queued again ${tally.requeued}); run ${((Date.now() - t0) / 1000).toFixed(0)} s`,
      );
      expect(load.gaveUp()).toBe(0);
      expect(ids.length).toBeGreaterThan(RATE * 10);
      expect(tasks).toBe(ids.length);
      expect(n).toBe(ids.length);
      expect(stats.submissions).toBe(tasks);
      expect(stats.duplicateFingerprints).toBe(0);
      // A node lost loses no event: the solvers retry a publish past a leader election.
      expect(tally.eventsLost).toBe(0);
    },
  );
}, 150_000);
