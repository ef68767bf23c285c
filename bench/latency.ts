// 4. Latency overhead: what a client of ours (@pipeline/client: submit, then long-poll) waits from
// POST /v1/tasks to seeing `completed` through GET /v1/tasks/:id?wait=N, minus the provider's own latency, at half the end-to-end maximum
// rate. Baseline: a client calling the provider (the same emulator) directly at the same rate.

import { type Client, createClient, type TaskRequest } from "@pipeline/client";
import { PROVIDER_KEY } from "@pipeline/devstack/testing";
import type postgres from "postgres";
import { clients, concurrency, e2eTasks, pipelineThroughput } from "./end-to-end.ts";
import { waitForCompleted } from "./support/completion.ts";
import { type BenchContext, type Benchmark, envCount } from "./support/context.ts";
import { closedLoop, openLoop, quantile } from "./support/load.ts";
import { API_KEY, type Pipeline, startPipeline, submitTask, taskBody } from "./support/pipeline.ts";
import type { Figure } from "./support/report.ts";

const PROVIDER_LATENCY_MS = 200;
const POLL_INTERVAL_MS = 10;

const clientsByUrl = new Map<string, Client>();
/** Our REST client (@pipeline/client), one per gateway: what a client of ours waits. */
const clientOf = (gatewayUrl: string) => {
  let c = clientsByUrl.get(gatewayUrl);
  if (!c) clientsByUrl.set(gatewayUrl, (c = createClient({ regions: [gatewayUrl], apiKey: API_KEY })));
  return c;
};

/** Submit, then long-poll until the task is final, through @pipeline/client; ms from the submit to the answer that shows it completed. */
async function throughGateway(gatewayUrl: string, i: number, run: string): Promise<{ id: string; ms: number }> {
  const client = clientOf(gatewayUrl);
  const t0 = performance.now();
  const task = JSON.parse(taskBody(i, run)) as TaskRequest;
  const { id } = await client.submit(task, { idempotencyKey: `${run}-${i}` });
  const view = await client.wait(id, { timeoutMs: 120_000 });
  if (view.status !== "completed") throw new Error(`task ${id}: ${view.status} ${JSON.stringify(view).slice(0, 200)}`);
  return { id, ms: performance.now() - t0 };
}

/** The same task sent straight to the provider: in.php, first poll after its latency, then every POLL_INTERVAL_MS. */
async function direct(emulatorUrl: string, i: number): Promise<number> {
  const call = async (path: string, fields: Record<string, string>) => {
    const res = await fetch(`${emulatorUrl}/${path}`, {
      method: "POST",
      body: new URLSearchParams({ ...fields, key: PROVIDER_KEY, json: "1" }),
    });
    return (await res.json()) as { status: number; request: string };
  };
  const t0 = performance.now();
  const sub = await call("in.php", {
    method: "turnstile",
    sitekey: "0x4AAAAAAAC3DHQFLr1GavRN",
    pageurl: `https://bench.example.com/direct/${i}`,
  });
  if (sub.status !== 1) throw new Error(`in.php: ${sub.request}`);
  await Bun.sleep(PROVIDER_LATENCY_MS);
  for (;;) {
    const r = await call("res.php", { action: "get", id: sub.request });
    if (r.status === 1) return performance.now() - t0;
    if (r.request !== "CAPCHA_NOT_READY") throw new Error(`res.php: ${r.request}`);
    await Bun.sleep(POLL_INTERVAL_MS);
  }
}

function settledValues<T>(settled: PromiseSettledResult<T>[], what: string): T[] {
  const failed = settled.filter((s) => s.status === "rejected");
  if (failed.length)
    throw new Error(`${failed.length} ${what} requests failed: ${String((failed[0] as PromiseRejectedResult).reason)}`);
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}

/** Medians of where a task's time went, from the row's own timestamps (one clock: Postgres now()). */
async function breakdown(sql: postgres.Sql, done: { id: string; ms: number }[]): Promise<Record<string, number>> {
  const rows = await sql<{ id: string; queued: number; solving: number; stored: number }[]>`
    select id::text,
           extract(epoch from started_at - created_at) * 1000 as queued,
           extract(epoch from completed_at - started_at) * 1000 as solving,
           extract(epoch from completed_at - created_at) * 1000 as stored
    from tasks where id = any(${done.map((d) => d.id)}::uuid[])`;
  const byId = new Map(rows.map((r) => [r.id, r]));
  const col = (f: (r: { queued: number; solving: number; stored: number }, ms: number) => number) =>
    quantile(
      done.flatMap((d) => (byId.has(d.id) ? [f(byId.get(d.id)!, d.ms)] : [])),
      0.5,
    );
  return {
    acceptedToClaimedMs: col((r) => Number(r.queued)),
    claimedToCompletedMs: col((r) => Number(r.solving)),
    clientSawItAfterRowMs: col((r, ms) => ms - Number(r.stored)),
  };
}

/** The maximum rate the latency is measured at half of, and where it came from. */
async function maximumRate(ctx: BenchContext): Promise<{ maxRate: number; source: string }> {
  // A fixed rate (BENCH_LATENCY_RATE, tasks/s), to compare runs whose maxima differ.
  const fixed = envCount("BENCH_LATENCY_RATE", 0);
  if (fixed > 0) return { maxRate: fixed * 2, source: "BENCH_LATENCY_RATE" };
  const earlier = ctx.earlier.find((f) => f.bench === "end-to-end")?.ours;
  if (earlier !== undefined) return { maxRate: earlier, source: "the end-to-end figure of this run" };
  const tasks = Math.min(1500, e2eTasks());
  ctx.log(`latency: no end-to-end figure in this run; measuring the maximum rate first (${tasks} tasks)`);
  const maxRate = (await pipelineThroughput(ctx, { tasks, solvers: 1, run: "latency-max" })).perSecond;
  return { maxRate, source: `a ${tasks}-task end-to-end run made for it` };
}

/**
 * The rate is half of a warm maximum (end-to-end's 15,000-task warm-up): the processes are
 * warmed the same way first (submitted as fast as they go, run to completion), then a
 * hundred through the long-poll path.
 */
async function warmUp(p: Pipeline): Promise<void> {
  const jitWarm = envCount("BENCH_LATENCY_WARMUP", 15_000);
  const jit = await closedLoop(jitWarm, clients(), (i) => submitTask(p.gatewayUrl, i, "latency-jit"));
  if (jit.errors) throw new Error(`warm-up: ${jit.firstError}`);
  await waitForCompleted(p.db.sql, jitWarm, 60_000 + jitWarm * 20);
  const warm = await closedLoop(100, clients(), (i) => throughGateway(p.gatewayUrl, i, "latency-warmup"));
  if (warm.errors) throw new Error(`warm-up: ${warm.firstError}`);
}

/** What a latency run measured: the settings, every task's time through the pipeline and direct, and where ours went. */
interface LatencyRun {
  rate: number;
  maxRate: number;
  source: string;
  count: number;
  solverConcurrency: number;
  ours: number[];
  base: number[];
  parts: Record<string, number>;
}

const spread = (ms: number[]) => ({
  p50: quantile(ms, 0.5),
  p90: quantile(ms, 0.9),
  p99: quantile(ms, 0.99),
  max: quantile(ms, 1),
});

/** The p50 and p99 overheads over the provider, ours against the direct client. */
function latencyFigures(r: LatencyRun): Figure[] {
  const { ours, base, parts } = r;
  const row = (q: number, label: string) => {
    const o = quantile(ours, q) - PROVIDER_LATENCY_MS;
    const b = quantile(base, q) - PROVIDER_LATENCY_MS;
    return { o, b, label };
  };
  return [row(0.5, "p50"), row(0.99, "p99")].map((x, k) => ({
    bench: "latency",
    figure: `${x.label} overhead over the provider`,
    ours: x.o,
    unit: "ms",
    baseline: { label: "client -> provider direct", value: x.b },
    ratio: x.o / x.b,
    ...(k === 0
      ? {
          note: `latency: ${r.count} tasks at ${r.rate.toFixed(0)}/s (open loop; half of ${r.maxRate.toFixed(0)}/s from ${r.source}); provider latency ${PROVIDER_LATENCY_MS} ms, FIRST_POLL_MS=${PROVIDER_LATENCY_MS}, POLL_INTERVAL_MS=${POLL_INTERVAL_MS}, SOLVER_CONCURRENCY=${r.solverConcurrency}. Overhead = (POST -> the long-poll of @pipeline/client shows completed) - ${PROVIDER_LATENCY_MS} ms; direct = in.php, wait ${PROVIDER_LATENCY_MS} ms, res.php, minus ${PROVIDER_LATENCY_MS} ms. Totals p50/p99: ours ${quantile(ours, 0.5).toFixed(0)}/${quantile(ours, 0.99).toFixed(0)} ms, direct ${quantile(base, 0.5).toFixed(0)}/${quantile(base, 0.99).toFixed(0)} ms. Where ours goes (medians, from the rows' timestamps): accepted -> claimed ${parts.acceptedToClaimedMs!.toFixed(0)} ms, claimed -> completed ${parts.claimedToCompletedMs!.toFixed(0)} ms (${PROVIDER_LATENCY_MS} of them the provider's), client saw it ${parts.clientSawItAfterRowMs!.toFixed(0)} ms after the row's creation-to-completion span (POST before the INSERT + long-poll wake-up + GET).`,
        }
      : {}),
  }));
}

export const latency: Benchmark = {
  name: "latency",
  title: `submit -> completed (@pipeline/client: submit, long-poll) minus a ${PROVIDER_LATENCY_MS} ms provider, at half the end-to-end maximum rate`,
  async run(ctx) {
    const { maxRate, source } = await maximumRate(ctx);
    const rate = maxRate / 2;
    const count = Math.max(200, Math.min(envCount("BENCH_LATENCY_TASKS", 3000), Math.round(rate * 20)));
    // Room for every task the rate keeps in flight (Little's law: rate x ~0.25 s, twice over), so
    // the figure is the pipeline's overhead, not a wait for a concurrency slot: at 838/s the
    // default 200 held ~210 tasks and the claims queued (173 ms median, issue 13's last run).
    const solverConcurrency = Math.max(concurrency(), Math.ceil(rate * 0.5));
    const p = await startPipeline(ctx.scope, ctx, {
      solvers: 1,
      emulator: { latencyMs: PROVIDER_LATENCY_MS, threads: Math.max(1000, solverConcurrency) },
      solverEnv: {
        FIRST_POLL_MS: String(PROVIDER_LATENCY_MS),
        POLL_INTERVAL_MS: String(POLL_INTERVAL_MS),
        SOLVER_CONCURRENCY: String(solverConcurrency),
      },
    });
    ctx.log(`latency: ${count} tasks at ${rate.toFixed(0)}/s (half of ${maxRate.toFixed(0)}/s from ${source})`);
    await warmUp(p);
    const done = settledValues(
      await openLoop(count, rate, (i) => throughGateway(p.gatewayUrl, i, "latency")),
      "pipeline",
    );
    const ours = done.map((d) => d.ms);
    const base = settledValues(await openLoop(count, rate, (i) => direct(p.emulatorUrl, i)), "direct");
    const parts = await breakdown(p.db.sql, done);
    ctx.detail.latency = {
      rate,
      maxRate,
      source,
      count,
      providerLatencyMs: PROVIDER_LATENCY_MS,
      pipelineMs: spread(ours),
      directMs: spread(base),
      pipelineMedians: parts,
    };
    return latencyFigures({ rate, maxRate, source, count, solverConcurrency, ours, base, parts });
  },
};
