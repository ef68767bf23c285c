// Dead solvers found by their silence, with the default settings (30 s leases and AckWait): a
// solver killed -9 has its tasks resumed by a peer (provider ids polled, never submitted again)
// and its provider slots freed within 10 s, also when it is started again at once under its own
// WORKER_ID (a new incarnation: its predecessor's claims are not its own, and are taken over); a
// solver that is only paused (SIGSTOP) long enough to be declared dead, then resumed, causes no
// second submission.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { eventually } from "@pipeline/devstack/testing";
import { workerNameOf } from "@pipeline/shared/kv";
import { api, type Proc, type Stack, startStack } from "./harness.ts";

let s: Stack;
beforeAll(async () => {
  // Default LEASE_MS / ACK_WAIT_MS / DEAD_AFTER_MS; provider tasks take 8 s, so they are at the provider when the solver dies.
  s = await startStack({
    region: "takeover",
    solvers: 2,
    emulator: { latencyMs: 8000 },
    solverEnv: { FIRST_POLL_MS: "1000", POLL_INTERVAL_MS: "1000" },
  });
  await eventually(() => s.logs().split("solver started").length - 1 >= 2, 30_000, 100);
}, 60_000);
afterAll(() => s.stop());

const turnstile = (i: string) => ({
  type: "turnstile",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/takeover/${i}` },
});

/** Solvers started again under another process's WORKER_ID, by that id. */
const restartedAs = new Map<string, Proc>();

/** Submits n tasks and waits until each has its provider id checkpointed; the busiest solver and its tasks. */
async function inFlightAtProvider(prefix: string, n: number) {
  const ids: string[] = [];
  for (let i = 0; i < n; i++)
    ids.push(
      (await api<{ id: string }>(s, "/v1/tasks", { method: "POST", body: turnstile(`${prefix}-${i}`) })).body.id,
    );
  await eventually(
    async () => {
      const [c] = await s.db.sql<
        { n: number }[]
      >`select count(*)::int as n from tasks where id = any(${ids}::uuid[]) and provider_id is not null and state = 'solving'`;
      return c!.n === n;
    },
    30_000,
    50,
  );
  const owners = await s.db.sql<{ owner: string; ids: string[] }[]>`
    select lease_owner as owner, array_agg(id::text) as ids from tasks where id = any(${ids}::uuid[]) group by lease_owner order by count(*) desc`;
  const busiest = owners[0]!;
  // A holder is `<WORKER_ID>.<incarnation>`; the harness names a solver's process by its WORKER_ID.
  const name = workerNameOf(busiest.owner);
  const proc = (restartedAs.get(name) ?? s.solvers.find((p) => p.name === name && p.exitCode() === undefined)) as Proc;
  return { ids, victim: proc, victimTasks: busiest.ids, holder: busiest.owner };
}

/** Kills the busiest solver -9 (then `afterKill`); seconds until its tasks and its slots are held by no one of it. */
async function killAndMeasure(prefix: string, afterKill: (victim: Proc) => void) {
  const before = s.emu.stats().submissions;
  const { ids, victim, victimTasks, holder } = await inFlightAtProvider(prefix, 30);
  expect(victimTasks.length).toBeGreaterThan(0);
  const killedAt = Date.now();
  await victim.kill("SIGKILL");
  afterKill(victim);
  // Resumed: every task of the victim is held by a live solver again (or already done).
  const resumedAt = await eventually(
    async () => {
      const [c] = await s.db.sql<
        { n: number }[]
      >`select count(*)::int as n from tasks where id = any(${victimTasks}::uuid[]) and state = 'solving' and lease_owner = ${holder}`;
      return c!.n === 0 ? Date.now() : undefined;
    },
    45_000,
    100,
  );
  const slotsFreedAt = await eventually(
    async () => {
      const [c] = await s.db.sql<
        { n: number }[]
      >`select count(*)::int as n from provider_slot_blocks where owner = ${holder} and lease_until > now()`;
      return c!.n === 0 ? Date.now() : undefined;
    },
    45_000,
    100,
  );
  const views = await Promise.all(ids.map((id) => api<{ status: string }>(s, `/v1/tasks/${id}?wait=60`)));
  const states = views.reduce<Record<string, number>>(
    (m, v) => ((m[`${v.status}:${v.body.status}`] = (m[`${v.status}:${v.body.status}`] ?? 0) + 1), m),
    {},
  );
  expect(states).toEqual({ "200:completed": ids.length });
  return {
    victim,
    held: victimTasks.length,
    takeoverS: (resumedAt - killedAt) / 1000,
    slotsS: (slotsFreedAt - killedAt) / 1000,
    submissions: s.emu.stats().submissions - before,
    tasks: ids.length,
  };
}

test("a solver killed -9 with default settings: its tasks resumed by a peer and its slots freed within 10 s, nothing submitted twice", async () => {
  const r = await killAndMeasure("kill", () => {});
  console.log(
    `[takeover] kill -9 of ${r.victim.name} holding ${r.held} tasks at the provider: resumed by a peer after ${r.takeoverS.toFixed(1)} s, slots freed after ${r.slotsS.toFixed(1)} s (LEASE_MS and ACK_WAIT_MS 30 s); provider submissions ${r.submissions} for ${r.tasks} tasks`,
  );
  expect(r.takeoverS).toBeLessThanOrEqual(10);
  expect(r.slotsS).toBeLessThanOrEqual(10);
  expect(r.submissions).toBe(r.tasks);
  s.spawnSolver();
}, 120_000);

test("a solver killed -9 and started again at once under its own WORKER_ID: its predecessor's tasks taken over within 10 s, nothing submitted twice", async () => {
  await eventually(async () => s.solvers.filter((p) => p.exitCode() === undefined).length >= 2, 10_000, 100);
  await Bun.sleep(3000); // the solver started above holds its share of the next tasks
  const r = await killAndMeasure("restart", (victim) =>
    restartedAs.set(victim.name, s.spawnSolver({ WORKER_ID: victim.name })),
  );
  console.log(
    `[takeover] kill -9 of ${r.victim.name} holding ${r.held} tasks at the provider, started again at once with WORKER_ID=${r.victim.name}: its predecessor's tasks taken over after ${r.takeoverS.toFixed(1)} s, slots freed after ${r.slotsS.toFixed(1)} s; provider submissions ${r.submissions} for ${r.tasks} tasks`,
  );
  expect(r.takeoverS).toBeLessThanOrEqual(10);
  expect(r.slotsS).toBeLessThanOrEqual(10);
  expect(r.submissions).toBe(r.tasks);
}, 120_000);

test("a solver paused (SIGSTOP) past DEAD_AFTER_MS, then resumed (SIGCONT): declared dead, its tasks finished by a peer, no second submission", async () => {
  await eventually(async () => s.solvers.filter((p) => p.exitCode() === undefined).length >= 2, 10_000, 100);
  const before = s.emu.stats().submissions;
  const dupBefore = s.emu.stats().duplicateFingerprints;
  const { ids, victim, victimTasks, holder } = await inFlightAtProvider("pause", 30);
  process.kill(victim.pid, "SIGSTOP");
  try {
    await eventually(
      async () => {
        const [c] = await s.db.sql<
          { n: number }[]
        >`select count(*)::int as n from tasks where id = any(${victimTasks}::uuid[]) and state = 'solving' and lease_owner = ${holder}`;
        return c!.n === 0;
      },
      30_000,
      100,
    );
  } finally {
    process.kill(victim.pid, "SIGCONT");
  }
  const views = await Promise.all(ids.map((id) => api<{ status: string }>(s, `/v1/tasks/${id}?wait=60`)));
  expect(views.every((v) => v.body.status === "completed")).toBe(true);
  await Bun.sleep(3000); // what the resumed solver still does, it does now
  console.log(
    `[takeover] ${victim.name} paused holding ${victimTasks.length} tasks, then resumed: provider submissions ${s.emu.stats().submissions - before} for ${ids.length} tasks`,
  );
  expect(s.emu.stats().submissions - before).toBe(ids.length);
  expect(s.emu.stats().duplicateFingerprints).toBe(dupBefore);
  expect(victim.exitCode()).toBeUndefined(); // alive, not killed by being declared dead
}, 120_000);
