// Dead solvers found by their silence, with the default settings (30 s leases and AckWait): a
// solver killed -9 has its tasks resumed by a peer (provider ids polled, never submitted again)
// and its provider slots freed within 10 s; a solver that is only paused (SIGSTOP) long enough
// to be declared dead, then resumed, causes no second submission.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { eventually } from "@pipeline/devstack/testing";
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
  const proc = s.solvers.find((p) => p.name === busiest.owner && p.exitCode() === undefined) as Proc;
  return { ids, victim: proc, victimTasks: busiest.ids };
}

test("a solver killed -9 with default settings: its tasks resumed by a peer and its slots freed within 10 s, nothing submitted twice", async () => {
  const before = s.emu.stats().submissions;
  const { ids, victim, victimTasks } = await inFlightAtProvider("kill", 30);
  expect(victimTasks.length).toBeGreaterThan(0);
  const killedAt = Date.now();
  await victim.kill("SIGKILL");
  // Resumed: every task of the victim is held by a live solver again (or already done).
  const resumedAt = await eventually(
    async () => {
      const [c] = await s.db.sql<
        { n: number }[]
      >`select count(*)::int as n from tasks where id = any(${victimTasks}::uuid[]) and state = 'solving' and lease_owner = ${victim.name}`;
      return c!.n === 0 ? Date.now() : undefined;
    },
    30_000,
    100,
  );
  const slotsFreedAt = await eventually(
    async () => {
      const [c] = await s.db.sql<
        { n: number }[]
      >`select count(*)::int as n from provider_slot_blocks where owner = ${victim.name} and lease_until > now()`;
      return c!.n === 0 ? Date.now() : undefined;
    },
    30_000,
    100,
  );
  const views = await Promise.all(ids.map((id) => api<{ status: string }>(s, `/v1/tasks/${id}?wait=60`)));
  const states = views.reduce<Record<string, number>>(
    (m, v) => ((m[`${v.status}:${v.body.status}`] = (m[`${v.status}:${v.body.status}`] ?? 0) + 1), m),
    {},
  );
  expect(states).toEqual({ "200:completed": ids.length });
  const takeoverS = (resumedAt - killedAt) / 1000;
  const slotsS = (slotsFreedAt - killedAt) / 1000;
  console.log(
    `[takeover] kill -9 of ${victim.name} holding ${victimTasks.length} tasks at the provider: resumed by a peer after ${takeoverS.toFixed(1)} s, slots freed after ${slotsS.toFixed(1)} s (LEASE_MS and ACK_WAIT_MS 30 s); provider submissions ${s.emu.stats().submissions - before} for ${ids.length} tasks`,
  );
  expect(takeoverS).toBeLessThanOrEqual(10);
  expect(slotsS).toBeLessThanOrEqual(10);
  expect(s.emu.stats().submissions - before).toBe(ids.length);
  s.spawnSolver();
}, 120_000);

test("a solver paused (SIGSTOP) past DEAD_AFTER_MS, then resumed (SIGCONT): declared dead, its tasks finished by a peer, no second submission", async () => {
  await eventually(async () => s.solvers.filter((p) => p.exitCode() === undefined).length >= 2, 10_000, 100);
  const before = s.emu.stats().submissions;
  const dupBefore = s.emu.stats().duplicateFingerprints;
  const { ids, victim, victimTasks } = await inFlightAtProvider("pause", 30);
  process.kill(victim.pid, "SIGSTOP");
  try {
    await eventually(
      async () => {
        const [c] = await s.db.sql<
          { n: number }[]
        >`select count(*)::int as n from tasks where id = any(${victimTasks}::uuid[]) and state = 'solving' and lease_owner = ${victim.name}`;
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
