// Queue loss drill: the TASKS stream is deleted mid-run under a steady load; `rebuild-queue`
// recreates it from Postgres and the solver, restarted, recreates its consumers. Every
// acknowledged task completes (RPO = 0) and none is submitted to the provider twice.
import { afterAll, expect, test } from "bun:test";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { api, type E2eStack as Stack, startE2eStack as startStack, steadyLoad } from "@pipeline/devstack/stack";
import { eventually } from "@pipeline/devstack/testing";
import { createLogger } from "@pipeline/shared/log";
import { connectNats } from "@pipeline/shared/nats";
import { streams } from "@pipeline/shared/subjects";
import type { RecoveryContext } from "../context.ts";
import { rebuildQueue } from "./rebuild-queue.ts";

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

test("TASKS deleted mid-run: rebuild-queue + solver restart complete every acknowledged task, none submitted twice", async () => {
  const region = "rqloss";
  // Default AckWait/lease (30 s). With 5 s the restarted solver, given a backlog of ~300 messages
  // at once, saw some redelivered while it still handled them, and handled both copies at once
  // in one process (its claim lets the same worker claim again): 49 double submissions. That is
  // a solver matter, reported; the rebuild itself puts one message per task.
  const s = await startStack({
    region,
    solvers: 1,
    emulator: { latencyMs: 500 },
    solverEnv: { DRAIN_TIMEOUT_MS: "3000" },
  });
  cleanups.push(() => s.stop());
  const nc = await connectNats(s.nats.url, "recovery-test", s.nats.auth("admin"));
  cleanups.push(() => nc.close());
  const jsm = await jetstreamManager(nc);
  const ctx: RecoveryContext = {
    region,
    nc,
    js: jetstream(nc),
    jsm,
    database: s.db,
    log: createLogger("recovery", { level: "silent" }),
    publishDeadlineMs: 10_000,
  };

  // ~80 submissions/s for ~5 s: the fault (at 2.5 s) falls inside the load.
  const load = steadyLoad(s, "ql", 400, 8, 100);
  await Bun.sleep(2500);
  // The fault: the queue is gone, messages and consumers with it.
  const fault = Date.now();
  await jsm.streams.delete(streams.tasks(region));
  const openAtFault = (
    await s.db.sql<
      { id: string; state: string }[]
    >`select id, state from tasks where state in ('queued', 'retrying', 'solving')`
  ).map((r) => r);
  const ackedAtFault = load.acked.length;
  // The fault came mid-run: submissions still coming, tasks unfinished.
  expect(ackedAtFault).toBeLessThan(400);
  expect(openAtFault.length).toBeGreaterThan(0);
  // Detection (assess: "TASKS does not exist") and the command, then the solver restart.
  await Bun.sleep(500);
  const rebuilding = rebuildQueue(ctx, { gatewayGraceMs: 12_000 });
  await s.solvers[0]!.kill();
  s.spawnSolver();
  await load.done;
  const report = await rebuilding;
  const ids = load.acked.map((a) => a.id);
  expect(new Set(ids).size).toBe(400);
  await eventually(
    async () => {
      const [r] = await s.db.sql<
        { n: number }[]
      >`select count(*)::int as n from tasks where id = any(${ids}::uuid[]) and state = 'completed'`;
      return r?.n === ids.length;
    },
    90_000,
    250,
  );
  const views = await Promise.all(ids.map((id) => api<{ status: string }>(s, `/v1/tasks/${id}`)));
  const lost = views.filter((v) => v.body.status !== "completed").length;
  const queuedAtFault = openAtFault.filter((r) => r.state === "queued").map((r) => r.id);
  const [t] = await s.db.sql<{ first: string | null; last: string | null }[]>`
    select min(completed_at) as first, max(completed_at) as last from tasks where id = any(${queuedAtFault}::uuid[])`;
  const firstMs = t?.first ? new Date(t.first).getTime() - fault : NaN;
  const lastMs = t?.last ? new Date(t.last).getTime() - fault : NaN;
  const stats = s.emu.stats();
  console.log(
    `[recovery-queue-loss] TASKS deleted with ${openAtFault.length} unfinished tasks (${queuedAtFault.length} queued, ${ackedAtFault} acknowledged so far); ` +
      `rebuild-queue: ${report.republished} re-published, ${report.deferred} fresh rows re-checked after the gateway grace, ${report.ms} ms. ` +
      `RTO: first queued-at-fault task completed ${firstMs} ms after the fault, all of them by ${lastMs} ms; ` +
      `RPO: ${lost} of ${ids.length} acknowledged tasks lost; provider submissions ${stats.submissions} for ${ids.length} tasks, duplicates ${stats.duplicateFingerprints}`,
  );
  expect(lost).toBe(0);
  expect(stats.duplicateFingerprints).toBe(0);
  expect(stats.submissions).toBe(ids.length);
}, 180_000);
