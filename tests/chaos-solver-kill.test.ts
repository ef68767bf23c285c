// The heart of the product: kill -9 solver processes while 500 tasks are being solved; every
// task must complete, and the provider must see no extra submission.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { TaskView } from "@pipeline/shared/schemas";
import { api, type Proc, type Stack, startStack, submittedTwice, submitWindowsAtKill } from "./harness.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({
    region: "chaos",
    solvers: 3,
    emulator: { latencyMs: 2000, latencyJitterMs: 8000 },
    solverEnv: {
      LOG_LEVEL: "debug",
      ACK_WAIT_MS: "3000",
      LEASE_MS: "3000",
      FIRST_POLL_MS: "1000",
      POLL_INTERVAL_MS: "1000",
      SOLVER_CONCURRENCY: "600",
      DRAIN_TIMEOUT_MS: "1000",
    },
  });
});
afterAll(() => s.stop());

test("kill -9 of random solvers every few seconds: all 500 tasks complete, no extra provider submission", async () => {
  const specs = Array.from({ length: 500 }, (_, i) => ({
    type: "turnstile",
    params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/chaos/${i}` },
  }));
  const t0 = Date.now();
  const ids: string[] = [];
  for (let i = 0; i < specs.length; i += 50) {
    const batch = await Promise.all(
      specs.slice(i, i + 50).map((body) => api<{ id: string }>(s, "/v1/tasks", { method: "POST", body })),
    );
    for (const r of batch) ids.push(r.body.id);
  }
  let kills = 0;
  let stop = false;
  const killer = (async () => {
    // Kills start once every task's provider id is checkpointed: they land while provider tasks
    // are in flight (2-10 s each), which the checkpoint must survive. A kill between the
    // provider's OK and the checkpoint costs a second submission (the protocol has no
    // idempotency key); the next test measures that window on purpose. (Waiting only for the
    // provider to have seen 500 submissions was not enough: on a loaded machine the replies and
    // checkpoints trail by up to a second, and kills landed inside that window.)
    const since = Date.now();
    for (;;) {
      const [c] = await s.db.sql<
        { n: number }[]
      >`select count(*)::int as n from tasks where provider_id is not null or state in ('completed', 'failed', 'cancelled')`;
      if (c!.n >= 500 || Date.now() - since > 30_000) break;
      await Bun.sleep(50);
    }
    while (!stop && kills < 12) {
      const alive = s.solvers.filter((p) => p.exitCode() === undefined);
      const victim: Proc = alive[Math.floor(Math.random() * alive.length)]!;
      await victim.kill("SIGKILL");
      kills++;
      s.spawnSolver();
      await Bun.sleep(800 + Math.random() * 800);
    }
  })();
  const pending = new Set(ids);
  while ((pending.size > 0 || kills < 10) && Date.now() - t0 < 150_000) {
    const rows = await s.db.sql<
      { id: string; state: string }[]
    >`select id, state from tasks where state in ('completed', 'failed', 'cancelled')`;
    for (const r of rows) pending.delete(r.id);
    await Bun.sleep(500);
  }
  await killer.then(
    () => {},
    () => {},
  );
  stop = true;
  const elapsed = Date.now() - t0;
  const views = await Promise.all(ids.map((id) => api<TaskView>(s, `/v1/tasks/${id}`)));
  const states = views.reduce<Record<string, number>>(
    (m, v) => ((m[v.body.status] = (m[v.body.status] ?? 0) + 1), m),
    {},
  );
  const stats = s.emu.stats();
  const [agg] = await s.db.sql<
    { submissions: number; attempts: number }[]
  >`select sum(provider_submissions)::int as submissions, sum(attempts)::int as attempts from tasks`;
  console.log(
    `[chaos] 500 tasks, ${kills} kill -9s: all done in ${elapsed} ms; states ${JSON.stringify(states)}; provider submissions ${stats.submissions} (extra ${stats.submissions - 500}), duplicate fingerprints ${stats.duplicateFingerprints}; claims ${agg!.attempts} (redeliveries ${agg!.attempts - 500})`,
  );
  const twice = await s.db
    .sql`select id, attempts, provider_submissions, provider_polls, error_code from tasks where provider_submissions > 1`;
  if (twice.length) console.log(`[chaos] tasks checkpointed twice: ${JSON.stringify(twice)}`);
  for (const story of submittedTwice(s).slice(0, 10)) console.log(`[chaos] submitted twice: ${story}`);
  expect(kills).toBeGreaterThanOrEqual(10);
  expect(states).toEqual({ completed: 500 });
  // Every provider id was checkpointed before the first kill, and a checkpointed task is only
  // ever polled: a kill, a lease taken over from a starved worker, a redelivery, none of them
  // may pay the provider a second time.
  expect(stats.submissions - 500).toBe(0);
}, 200_000);

test("kill -9 inside a submission burst: every task completes; extra submissions are counted and reported", async () => {
  const before = s.emu.stats().submissions;
  const specs = Array.from({ length: 300 }, (_, i) => ({
    type: "turnstile",
    params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/burst/${i}` },
  }));
  const submitting = Promise.all(specs.map((body) => api<{ id: string }>(s, "/v1/tasks", { method: "POST", body })));
  let kills = 0;
  const killed: Proc[] = [];
  for (let i = 0; i < 3; i++) {
    await Bun.sleep(300 + Math.random() * 300);
    const alive = s.solvers.filter((p) => p.exitCode() === undefined);
    const victim = alive[Math.floor(Math.random() * alive.length)]!;
    await victim.kill("SIGKILL");
    killed.push(victim);
    kills++;
    s.spawnSolver();
  }
  const ids = (await submitting).map((r) => r.body.id);
  const views = await Promise.all(ids.map((id) => api<TaskView>(s, `/v1/tasks/${id}?wait=60`)));
  expect(views.every((v) => v.body.status === "completed")).toBe(true);
  const extra = s.emu.stats().submissions - before - 300;
  const windows = submitWindowsAtKill(s, killed);
  console.log(
    `[chaos] submission burst: 300 tasks, ${kills} kill -9s mid-burst, extra provider submissions: ${extra} (at most ${windows.inWindow} tasks were between in.php and their checkpoint when killed, ${windows.unanswered} submits unanswered)`,
  );
  for (const story of submittedTwice(s).slice(0, 10)) console.log(`[chaos] submitted twice: ${story}`);
  // Only a kill between in.php's answer and the checkpoint (or an unanswered in.php) may pay twice.
  expect(extra).toBeGreaterThanOrEqual(0);
  expect(extra).toBeLessThanOrEqual(windows.inWindow + windows.unanswered);
}, 120_000);
