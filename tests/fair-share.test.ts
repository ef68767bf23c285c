// Weighted fair share of the provider plan (docs/fair-share.md) on a running stack: two clients in
// fair-share groups of weights 1 (`bulk`) and 3 (`team`); `bulk` queues 800 tasks at once, `team`
// 120 a few seconds later while the plan (12 threads, 1 s solves) is saturated. `team`'s first task
// starts within about one solve time (first come, first served it would wait for the whole
// backlog: ~60 s), and while both have work their thread-seconds are 1:3. The record is set with
// `recovery fair-share set` as an operator does; a bad record is refused naming the field.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@pipeline/devstack/testing";
import { unpepperedClientId } from "@pipeline/shared/client-ids";
import { api, type Stack, startStack, submitWindowsAtKill } from "./harness.ts";
import { runRecoveryCli } from "./support/recovery-cli.ts";

const region = "fairsh";
const BULK_KEY = "e2e-client-key-0001";
const TEAM_KEY = "fair-team-key-0002";
const THREADS = 12;
const dir = mkdtempSync(join(tmpdir(), "fair-share-e2e-"));
let s: Stack;

beforeAll(async () => {
  s = await startStack({
    region,
    solvers: 0,
    emulator: { latencyMs: 1000 },
    gatewayEnv: { API_KEYS: `${BULK_KEY},${TEAM_KEY}` },
  });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

/** `recovery <args> --json` against the stack; exit code, stdout and stderr. */
const recovery = (args: string[]) => runRecoveryCli(s, { region, snapshotDir: dir }, [...args, "--json"]);

function setFile(name: string, record: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(record));
  return path;
}

async function submitMany(key: string, n: number, tag: string): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 40 }, async () => {
      while (next < n) {
        const i = next++;
        const r = await api(s, "/v1/tasks", {
          method: "POST",
          headers: { authorization: `Bearer ${key}` },
          body: {
            type: "turnstile",
            params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/${tag}/${i}` },
          },
        });
        expect(r.status).toBe(202);
      }
    }),
  );
}

test("a bad fair-share record is refused naming the field; nothing is stored", async () => {
  const bad = await recovery([
    "fair-share",
    "set",
    setFile("bad.json", { groups: { team: { weight: 0, clients: [unpepperedClientId(TEAM_KEY)] } } }),
  ]);
  expect(bad.code).toBe(1);
  expect(bad.err).toContain("groups.team.weight");
  const twice = await recovery([
    "fair-share",
    "set",
    setFile("twice.json", {
      groups: {
        a: { weight: 1, clients: [unpepperedClientId(TEAM_KEY)] },
        b: { weight: 1, clients: [unpepperedClientId(TEAM_KEY)] },
      },
    }),
  ]);
  expect(twice.code).toBe(1);
  expect(twice.err).toContain("is already in group a");
  const shown = await recovery(["fair-share"]);
  expect(shown.code).toBe(0);
  expect(JSON.parse(shown.out).read.record).toBeNull();
});

test(`weights 1:3 on a saturated plan of ${THREADS}: the late group starts within a solve time, thread-seconds 1:3 while both have work`, async () => {
  const set = await recovery([
    "fair-share",
    "set",
    setFile("groups.json", {
      groups: {
        bulk: { weight: 1, clients: [unpepperedClientId(BULK_KEY)] },
        team: { weight: 3, clients: [unpepperedClientId(TEAM_KEY)] },
      },
    }),
  ]);
  expect(set.err).toBe("");
  expect(set.code).toBe(0);
  // The gateway reads the record every 5 s: wait until a task of bulk is on its group's subjects.
  await Bun.sleep(6000);
  await submitMany(BULK_KEY, 800, "bulk");
  s.spawnSolver({ PROVIDER_THREADS: String(THREADS), SOLVER_CONCURRENCY: "60" });
  await eventually(async () => {
    const [r] = await s.db.sql<{ n: number }[]>`select count(*)::int as n from tasks where state = 'completed'`;
    return r!.n >= 40;
  }, 60_000);
  const teamAt = Date.now();
  await submitMany(TEAM_KEY, 120, "team");
  const team = unpepperedClientId(TEAM_KEY);
  const bulk = unpepperedClientId(BULK_KEY);
  const firstStart = await eventually(async () => {
    const [r] = await s.db.sql<{ at: Date | null }[]>`select min(started_at) as at from tasks where owner = ${team}`;
    return r!.at ?? undefined;
  }, 30_000);
  await eventually(async () => {
    const [r] = await s.db.sql<{ n: number }[]>`
      select count(*)::int as n from tasks where owner = ${team} and state = 'completed'`;
    return r!.n === 120;
  }, 60_000);
  // The window both had work waiting: team's first claim to its last (after it, team has nothing
  // left to start, and its last tasks finishing leave threads to bulk by right).
  const [w] = await s.db.sql<{ from: Date; to: Date; bulk_left: number }[]>`
    select min(started_at) as from, max(started_at) as to,
      (select count(*)::int from tasks where owner = ${bulk} and state <> 'completed') as bulk_left
    from tasks where owner = ${team}`;
  // Threads each client held (claimed, not completed), sampled every 100 ms from one solve time
  // after team's first claim (bulk's threads turn over once in that time: the ramp) to its last.
  const rows = await s.db.sql<{ owner: string; n: number }[]>`
    select t.owner, count(*)::int as n
    from generate_series(${w!.from}::timestamptz + interval '1 second', ${w!.to}::timestamptz, interval '100 milliseconds') as g(at)
    join tasks t on t.started_at <= g.at and t.completed_at > g.at
    group by t.owner`;
  const ms = Object.fromEntries(rows.map((r) => [r.owner, r.n * 100]));
  const ratio = ms[team]! / ms[bulk]!;
  const startS = (new Date(firstStart).getTime() - teamAt) / 1000;
  const { out } = await recovery(["fair-share"]);
  const pendingGroups = Object.keys(JSON.parse(out).pending);
  console.log(
    `[fair-share] team (weight 3) first task started ${startS.toFixed(2)} s after its submit began, behind ${w!.bulk_left} bulk tasks still queued at the end; thread-seconds team:bulk over ${((new Date(w!.to).getTime() - new Date(w!.from).getTime()) / 1000 - 1).toFixed(1)} s (from one solve time after its first claim to its last) = ${(ms[team]! / 1000).toFixed(1)}:${(ms[bulk]! / 1000).toFixed(1)} = ${ratio.toFixed(2)} (goal 3)`,
  );
  expect(pendingGroups).toContain("team");
  expect(pendingGroups).toContain("bulk");
  expect(w!.bulk_left).toBeGreaterThan(0);
  expect(startS).toBeLessThan(3);
  // 12 threads split 3:1 are 9:3 at every lease; the first and last turn of the threads blur it.
  // The floor is 25% under 3: on a quiet machine the split is 2.93-3.10, but in CI, beside the
  // rehearsal booting its machines, it measured 2.27 and 2.52. A CPU-starved solver has fewer of
  // team's tasks pulled and waiting at the moment a unit frees, and the scheduler is work-conserving
  // (the unit goes to bulk rather than idle). First come, first served gives 1.12 and an even split
  // 1.0: the bound still tells weighted sharing from both.
  expect(ratio).toBeGreaterThan(3 * 0.75);
  expect(ratio).toBeLessThan(3 * 1.15);
}, 180_000);

test("crash with fair share on: a solver killed -9 while both groups have work; every task completes, nothing unexplained paid twice", async () => {
  const total = 920;
  // The measuring solver stops gracefully; two with a larger plan (and debug logs, for the kill's
  // submit window) finish the backlog, one of them killed -9 in the middle of it.
  await s.solvers[0]!.kill("SIGTERM");
  const env = { PROVIDER_THREADS: "60", SOLVER_CONCURRENCY: "120", LOG_LEVEL: "debug" };
  const a = s.spawnSolver(env);
  s.spawnSolver(env);
  await eventually(async () => {
    const [r] = await s.db.sql<{ n: number }[]>`
      select count(*)::int as n from tasks where state = 'solving' and provider_id is not null`;
    return r!.n >= 20;
  }, 30_000);
  await a.kill("SIGKILL");
  await eventually(
    async () => {
      const [r] = await s.db.sql<{ n: number }[]>`select count(*)::int as n from tasks where state = 'completed'`;
      return r!.n === total;
    },
    120_000,
    250,
  );
  const [open] = await s.db.sql<{ n: number }[]>`select count(*)::int as n from tasks where state <> 'completed'`;
  const extra = s.emu.stats().submissions - total;
  const explained = submitWindowsAtKill(s, [a]);
  console.log(
    `[fair-share] crash: ${total} tasks of two groups completed, ${open!.n} not; provider submissions ${s.emu.stats().submissions} (${extra} extra; the kill's submit window explains ${explained.inWindow + explained.unanswered})`,
  );
  expect(open!.n).toBe(0);
  expect(extra).toBeLessThanOrEqual(explained.inWindow + explained.unanswered);
}, 180_000);
