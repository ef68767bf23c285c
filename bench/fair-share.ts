// Fair share (docs/fair-share.md) against first come, first served, in the same run: a plan of 40
// threads (1 s solves); client `bulk` (weight 1) queues 5,000 tasks at once, client `team`
// (weight 3) queues 100 a minute later, while the plan is saturated. Each side: a fresh pipeline,
// one solver. Measured: how long after its submit `team`'s first task starts (goal: within one
// solve time), and the two clients' thread-seconds (claim to completion) while both had work
// (goal 1:3 within 10 %). The FCFS side has no fair-share record: `team` waits behind the backlog.
import { Kvm } from "@nats-io/kv";
import { unpepperedClientId } from "@pipeline/shared/client-ids";
import { FAIR_SHARE_KEY } from "@pipeline/shared/fair-share";
import { connectNats } from "@pipeline/shared/nats";
import { buckets } from "@pipeline/shared/subjects";
import { type BenchContext, type Benchmark, envCount } from "./support/context.ts";
import { closedLoop } from "./support/load.ts";
import { API_KEY, type Pipeline, startPipeline, submitTask } from "./support/pipeline.ts";
import type { Figure } from "./support/report.ts";

const PLAN = 40;
const LATENCY_MS = 1000;
const TEAM_KEY = "bench-team-key-0002";
const REGION = "bench";

interface Side {
  mode: "fair" | "fcfs";
  /** Seconds from `team`'s first submit to its first task's claim. */
  firstStartS: number;
  /** Seconds from `team`'s first submit to its last completion (undefined: not within the cap). */
  allDoneS: number | undefined;
  teamThreadS: number;
  bulkThreadS: number;
  windowS: number;
}

/** The fair-share record, written as `recovery fair-share set` does (the region bucket). */
async function setGroups(p: Pipeline): Promise<void> {
  const nc = await connectNats(p.natsUrl, "bench-fair", p.natsAdmin);
  try {
    const kv = await new Kvm(nc).open(buckets.region(REGION));
    const record = {
      groups: {
        bulk: { weight: 1, clients: [unpepperedClientId(API_KEY)] },
        team: { weight: 3, clients: [unpepperedClientId(TEAM_KEY)] },
      },
      defaultWeight: 1,
      by: "bench",
      at: new Date().toISOString(),
    };
    await kv.put(FAIR_SHARE_KEY, JSON.stringify(record));
  } finally {
    await nc.close();
  }
}

async function runSide(
  ctx: BenchContext,
  mode: Side["mode"],
  bulk: number,
  team: number,
  delayS: number,
): Promise<Side> {
  const scope = ctx.scope.child();
  try {
    const p = await startPipeline(scope, ctx, {
      solvers: 0,
      emulator: { latencyMs: LATENCY_MS, threads: PLAN },
      apiKeys: `${API_KEY},${TEAM_KEY}`,
      solverEnv: { FIRST_POLL_MS: "200", POLL_INTERVAL_MS: "100" },
    });
    if (mode === "fair") {
      await setGroups(p);
      // The gateway and the solver read the record every 5 s.
      await Bun.sleep(6000);
    }
    const t0 = Date.now();
    const sent = await closedLoop(bulk, 64, (i) => submitTask(p.gatewayUrl, i, `fair-${mode}-bulk`));
    if (sent.errors) throw new Error(`${sent.errors} bulk submissions failed: ${sent.firstError}`);
    await p.startSolver();
    await Bun.sleep(Math.max(0, t0 + delayS * 1000 - Date.now()));
    const teamAt = Date.now();
    const teamSent = await closedLoop(team, 16, (i) =>
      submitTask(p.gatewayUrl, i, `fair-${mode}-team`, "turnstile", TEAM_KEY),
    );
    if (teamSent.errors) throw new Error(`${teamSent.errors} team submissions failed: ${teamSent.firstError}`);
    return await measure(p, mode, team, teamAt);
  } finally {
    await scope.close();
  }
}

async function measure(p: Pipeline, mode: Side["mode"], team: number, teamAt: number): Promise<Side> {
  const teamId = unpepperedClientId(TEAM_KEY);
  const bulkId = unpepperedClientId(API_KEY);
  const capMs = 150_000;
  let done = false;
  while (Date.now() - teamAt < capMs) {
    const [r] = await p.db.sql<{ n: number }[]>`
      select count(*)::int as n from tasks where owner = ${teamId} and state = 'completed'`;
    if (r!.n >= team) {
      done = true;
      break;
    }
    await Bun.sleep(250);
  }
  // Both had work waiting from team's first claim to its last (after it, team has nothing left to
  // start). allDone: team's last completion.
  const [w] = await p.db.sql<{ first: Date | null; last: Date | null; done: Date | null }[]>`
    select min(started_at) as first, max(started_at) as last, max(completed_at) as done from tasks where owner = ${teamId}`;
  const from = new Date(w!.first ?? Date.now());
  const to = new Date(w!.last ?? Date.now());
  // Threads each client held (claimed, not completed), sampled every 100 ms from one solve time
  // after team's first claim (bulk's threads turn over once in that time: the ramp) to its last.
  const rows = await p.db.sql<{ owner: string; ms: number }[]>`
    select t.owner, (count(*) * 100)::float8 as ms
    from generate_series(${from.toISOString()}::timestamptz + ${`${LATENCY_MS} milliseconds`}::interval, ${to.toISOString()}::timestamptz, interval '100 milliseconds') as g(at)
    join tasks t on t.started_at <= g.at and coalesce(t.completed_at, now()) > g.at
    group by t.owner`;
  const ms = Object.fromEntries(rows.map((r) => [r.owner, r.ms]));
  return {
    mode,
    firstStartS: (from.getTime() - teamAt) / 1000,
    allDoneS: done && w!.done ? (new Date(w!.done).getTime() - teamAt) / 1000 : undefined,
    teamThreadS: (ms[teamId] ?? 0) / 1000,
    bulkThreadS: (ms[bulkId] ?? 0) / 1000,
    windowS: Math.max(0, (to.getTime() - from.getTime() - LATENCY_MS) / 1000),
  };
}

function figures(fair: Side, fcfs: Side, bulk: number, team: number, delayS: number): Figure[] {
  const setup = `plan ${PLAN} threads, ${LATENCY_MS / 1000} s solves; bulk (weight 1) queues ${bulk} tasks at once, team (weight 3) ${team} tasks ${delayS} s later; one solver per side, fair first`;
  const ratio = (s: Side) => s.teamThreadS / Math.max(0.001, s.bulkThreadS);
  const done = (s: Side) => (s.allDoneS === undefined ? "not within 150 s" : `${s.allDoneS.toFixed(1)} s`);
  return [
    {
      bench: "fair-share",
      figure: "late client's first task started after (s), fair share",
      ours: fair.firstStartS,
      unit: "s",
      baseline: { label: "first come, first served", value: fcfs.firstStartS },
      ratio: fair.firstStartS / Math.max(0.001, fcfs.firstStartS),
      note: `fair-share: ${setup}. Seconds from team's first submit to its first task's claim (goal: within one solve time, ${LATENCY_MS / 1000} s, plus the claim); team's ${team} tasks all completed after: fair ${done(fair)}, FCFS ${done(fcfs)}.`,
    },
    {
      bench: "fair-share",
      figure: "thread-seconds team:bulk while both had work, fair share (goal 3)",
      ours: ratio(fair),
      unit: "",
      baseline: { label: "first come, first served", value: ratio(fcfs) },
      note: `fair-share: threads each client held (claimed, not completed), sampled every 100 ms from one solve time after team's first claim (the ramp: the other's threads turn over once) to its last claim (both had work waiting), in thread-seconds: fair ${fair.teamThreadS.toFixed(1)}:${fair.bulkThreadS.toFixed(1)} over ${fair.windowS.toFixed(1)} s; FCFS ${fcfs.teamThreadS.toFixed(1)}:${fcfs.bulkThreadS.toFixed(1)} over ${fcfs.windowS.toFixed(1)} s (FCFS: team runs only once bulk's backlog is gone).`,
    },
  ];
}

export const fairShare: Benchmark = {
  name: "fair-share",
  title: `fair share of a ${PLAN}-thread plan between weights 1 and 3 against first come, first served (BENCH_FAIR_BULK 5000, BENCH_FAIR_TEAM 100, BENCH_FAIR_DELAY_S 60)`,
  async run(ctx) {
    const bulk = envCount("BENCH_FAIR_BULK", 5000);
    const team = envCount("BENCH_FAIR_TEAM", 100);
    const delayS = envCount("BENCH_FAIR_DELAY_S", 60);
    const fair = await runSide(ctx, "fair", bulk, team, delayS);
    ctx.log(`fair-share: fair: team started after ${fair.firstStartS.toFixed(2)} s; now first come, first served`);
    const fcfs = await runSide(ctx, "fcfs", bulk, team, delayS);
    ctx.detail.fairShare = { fair, fcfs };
    return figures(fair, fcfs, bulk, team, delayS);
  },
};
