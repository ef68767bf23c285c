// Adaptive concurrency (ADAPTIVE_CONCURRENCY=1) against the fixed plan, in the same run, against a
// provider whose real capacity changes under the plan (the emulator's capacity schedule): in.php
// refuses (ERROR_NO_SLOT_AVAILABLE) what the account holds beyond the capacity of the moment.
// Each side: a fresh pipeline, the same queue of tasks, one solver for the same seconds.
import type { EmulatorStats } from "@pipeline/emulator";
import { stateCounts } from "./support/completion.ts";
import { type BenchContext, type Benchmark, envCount } from "./support/context.ts";
import { closedLoop } from "./support/load.ts";
import { type Pipeline, startPipeline, submitTask } from "./support/pipeline.ts";
import { stopProc } from "./support/processes.ts";
import type { Figure } from "./support/report.ts";

const PLAN = 40;
const LATENCY_MS = 1000;
/** The real capacity, cycling: under the plan all the time, changing every 10 s. */
const STEPS = [
  { forMs: 10_000, threads: 20 },
  { forMs: 10_000, threads: 8 },
  { forMs: 10_000, threads: 30 },
];
/** After a capacity change, the limit is read from then on (it converged). */
const SETTLE_MS = 4000;

interface Side {
  mode: "fixed" | "adaptive";
  seconds: number;
  completed: number;
  states: Record<string, number>;
  stats: EmulatorStats;
  /** Adaptive side: the limit's min and max per capacity, after SETTLE_MS of each step. */
  bands: Record<number, { min: number; max: number }>;
}

/** The solver's adaptive limit (its one key), from its metrics endpoint; undefined without the gauge. */
async function limitOf(metricsUrl: string): Promise<number | undefined> {
  const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(5000) })).text().catch(() => "");
  const m = /^solver_provider_concurrency_limit\{[^}]*\} (\S+)$/m.exec(text);
  return m ? Number(m[1]) : undefined;
}

/** The capacity step at `t` ms since the schedule started (the schedule repeats). */
function stepAt(t: number): { threads: number; into: number } {
  const total = STEPS.reduce((n, s) => n + s.forMs, 0);
  let r = t % total;
  for (const s of STEPS) {
    if (r < s.forMs) return { threads: s.threads, into: r };
    r -= s.forMs;
  }
  return { threads: STEPS[0]!.threads, into: 0 };
}

/** One side: tasks queued, the schedule set, one solver run for `seconds`; what it completed and what the provider refused. */
async function runSide(ctx: BenchContext, mode: Side["mode"], tasks: number, seconds: number): Promise<Side> {
  const scope = ctx.scope.child();
  try {
    return await measureSide(await startSidePipeline(ctx, scope, mode), mode, tasks, seconds);
  } finally {
    await scope.close();
  }
}

function startSidePipeline(ctx: BenchContext, scope: BenchContext["scope"], mode: Side["mode"]): Promise<Pipeline> {
  return startPipeline(scope, ctx, {
    solvers: 0,
    emulator: { latencyMs: LATENCY_MS, threads: PLAN },
    solverEnv: {
      ADAPTIVE_CONCURRENCY: mode === "adaptive" ? "1" : "0",
      FIRST_POLL_MS: "200",
      POLL_INTERVAL_MS: "100",
      HIGH_LANE_RESERVED: "0",
    },
  });
}

async function measureSide(p: Pipeline, mode: Side["mode"], tasks: number, seconds: number): Promise<Side> {
  const sent = await closedLoop(tasks, 32, (i) => submitTask(p.gatewayUrl, i, `aimd-${mode}`));
  if (sent.errors) throw new Error(`${sent.errors} of ${tasks} submissions failed: ${sent.firstError}`);
  await p.resetEmulatorStats();
  const t0 = Date.now();
  const res = await fetch(`${p.emulatorUrl}/emulator/config`, {
    method: "POST",
    body: JSON.stringify({ faults: { capacity: { steps: STEPS, startAt: t0 } } }),
  });
  if (!res.ok) throw new Error(`emulator config: ${res.status} ${await res.text()}`);
  const solver = await p.startSolver();
  const metricsUrl = /"metrics":"([^"]+)"/.exec(solver.log())?.[1];
  const bands: Side["bands"] = {};
  while (Date.now() - t0 < seconds * 1000) {
    const step = stepAt(Date.now() - t0);
    const limit = mode === "adaptive" && metricsUrl ? await limitOf(metricsUrl) : undefined;
    if (limit !== undefined && step.into >= SETTLE_MS && Date.now() - t0 >= 10_000) {
      const b = (bands[step.threads] ??= { min: limit, max: limit });
      b.min = Math.min(b.min, limit);
      b.max = Math.max(b.max, limit);
    }
    await Bun.sleep(250);
  }
  const elapsed = (Date.now() - t0) / 1000;
  const stats = await p.emulatorStats();
  const states = await stateCounts(p.db.sql);
  await stopProc(solver);
  return { mode, seconds: elapsed, completed: states.completed ?? 0, states, stats, bands };
}

function figures(fixed: Side, adaptive: Side): Figure[] {
  const rate = (s: Side) => s.completed / s.seconds;
  const schedule = STEPS.map((s) => `${s.threads} for ${s.forMs / 1000} s`).join(", ");
  const setup = `plan ${PLAN} threads (PROVIDER_THREADS and the emulator key), real capacity cycling ${schedule}; provider latency ${LATENCY_MS / 1000} s; the queue full; one solver, ${Math.round(fixed.seconds)} s per side, fixed first`;
  const bands = Object.entries(adaptive.bands)
    .map(([c, b]) => `capacity ${c}: ${b.min}-${b.max}`)
    .join("; ");
  const failed = (s: Side) => s.states.failed ?? 0;
  return [
    {
      bench: "adaptive",
      figure: "refused submissions (ERROR_NO_SLOT_AVAILABLE), adaptive",
      ours: adaptive.stats.rejectedSubmissions,
      unit: "",
      baseline: { label: "fixed plan", value: fixed.stats.rejectedSubmissions },
      ratio: adaptive.stats.rejectedSubmissions / Math.max(1, fixed.stats.rejectedSubmissions),
      note: `adaptive: ${setup}. Refused in.php calls (each spends an attempt of its task and waits out a retry backoff); accepted: fixed ${fixed.stats.submissions}, adaptive ${adaptive.stats.submissions}; tasks failed (attempts spent): fixed ${failed(fixed)}, adaptive ${failed(adaptive)}.`,
    },
    {
      bench: "adaptive",
      figure: "completed tasks per second, adaptive",
      ours: rate(adaptive),
      unit: "/s",
      baseline: { label: "fixed plan", value: rate(fixed) },
      ratio: rate(adaptive) / rate(fixed),
      note: `adaptive: completed in the measured seconds: fixed ${fixed.completed} in ${fixed.seconds.toFixed(1)} s, adaptive ${adaptive.completed} in ${adaptive.seconds.toFixed(1)} s (the capacity caps both: at most its average over the latency).`,
    },
    {
      bench: "adaptive",
      figure: "adaptive limit band (min-max after convergence)",
      ours: Math.max(...Object.values(adaptive.bands).map((b) => b.max)),
      unit: "",
      note: `adaptive: solver_provider_concurrency_limit read every 250 ms from ${SETTLE_MS / 1000} s into each capacity step (after the first 10 s): ${bands || "no reading"}. The expected band for a capacity C is [floor(0.7 (C + 1)), C + 1] in tasks at the provider, plus the tasks whose answer was read and whose completion is being written (the solver holds their place until then). A step whose capacity is far above the previous one is not reached in its 10 s: the limit climbs by one per round trip (about the latency plus a poll), so its figures there are the climb, not a band.`,
    },
  ];
}

export const adaptive: Benchmark = {
  name: "adaptive",
  title: `ADAPTIVE_CONCURRENCY against the fixed plan (${PLAN} threads) under a provider capacity that changes every 10 s (BENCH_ADAPTIVE_SECONDS, default 45)`,
  async run(ctx) {
    const seconds = envCount("BENCH_ADAPTIVE_SECONDS", 45);
    // More than either side can complete: the queue never runs dry.
    const tasks = Math.ceil(seconds * (PLAN / (LATENCY_MS / 1000)) * 0.75);
    ctx.log(`adaptive: ${tasks} tasks per side, ${seconds} s each; fixed plan first`);
    const fixed = await runSide(ctx, "fixed", tasks, seconds);
    ctx.log(`adaptive: fixed ${fixed.completed} completed, ${fixed.stats.rejectedSubmissions} refused; now adaptive`);
    const adaptiveSide = await runSide(ctx, "adaptive", tasks, seconds);
    ctx.detail.adaptive = {
      fixed: { ...fixed, stats: pick(fixed.stats) },
      adaptive: { ...adaptiveSide, stats: pick(adaptiveSide.stats) },
    };
    return figures(fixed, adaptiveSide);
  },
};

const pick = (s: EmulatorStats) => ({
  submissions: s.submissions,
  rejectedSubmissions: s.rejectedSubmissions,
  resCalls: s.resCalls,
  maxInFlightByKey: s.maxInFlightByKey,
});
