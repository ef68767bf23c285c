// 4. Latency overhead: what a client of ours (@pipeline/client: submit, then long-poll) waits from
// POST /v1/tasks to seeing `completed` through GET /v1/tasks/:id?wait=N, minus the provider's own
// latency, against the same wait through the fair peer (its gateway's POST, then its GET ?wait,
// which waits with BullMQ's QueueEvents), both at the same offered rate: half the fair peer's
// end-to-end maximum. Context: a client calling the provider (the same emulator) directly.

import { type Client, createClient, type TaskRequest } from "@pipeline/client";
import { PROVIDER_KEY } from "@pipeline/devstack/testing";
import type postgres from "postgres";
import { clients, concurrency, e2eTasks, peerThroughput } from "./end-to-end.ts";
import { waitForCompleted } from "./support/completion.ts";
import { type BenchContext, type Benchmark, envCount } from "./support/context.ts";
import { closedLoop, openLoop, quantile } from "./support/load.ts";
import { startPeer } from "./support/peer.ts";
import { API_KEY, startPipeline, submitTask, taskBody } from "./support/pipeline.ts";
import type { Figure } from "./support/report.ts";
import type { Scope } from "./support/scope.ts";

const PROVIDER_LATENCY_MS = 200;
const POLL_INTERVAL_MS = 10;
/** The `?wait` each long-poll asks of the peer (ours: what @pipeline/client asks, up to 60 s). */
const PEER_WAIT_S = 30;

/** Wall-clock ms with sub-ms precision, comparable with Postgres now() on the same machine. */
const wallMs = () => performance.timeOrigin + performance.now();

/** One task as its client saw it (wall-clock ms): sent, answered 202, seen completed. */
interface Seen {
  id: string;
  submitAt: number;
  acceptedAt: number;
  sawAt: number;
}
const totalMs = (s: Seen) => s.sawAt - s.submitAt;

const clientsByUrl = new Map<string, Client>();
/** Our REST client (@pipeline/client), one per gateway: what a client of ours waits. */
const clientOf = (gatewayUrl: string) => {
  let c = clientsByUrl.get(gatewayUrl);
  if (!c) clientsByUrl.set(gatewayUrl, (c = createClient({ regions: [gatewayUrl], apiKey: API_KEY })));
  return c;
};

/** Submit, then long-poll until the task is final, through @pipeline/client. */
async function throughGateway(gatewayUrl: string, i: number, run: string): Promise<Seen> {
  const client = clientOf(gatewayUrl);
  const submitAt = wallMs();
  const task = JSON.parse(taskBody(i, run)) as TaskRequest;
  const { id } = await client.submit(task, { idempotencyKey: `${run}-${i}` });
  const acceptedAt = wallMs();
  const view = await client.wait(id, { timeoutMs: 120_000 });
  if (view.status !== "completed") throw new Error(`task ${id}: ${view.status} ${JSON.stringify(view).slice(0, 200)}`);
  return { id, submitAt, acceptedAt, sawAt: wallMs() };
}

const PEER_FINAL = new Set(["completed", "failed", "cancelled", "expired"]);

/** The same through the fair peer: its POST (the request submitTask sends), then GET ?wait until final. */
async function throughPeer(peerUrl: string, i: number, run: string): Promise<Seen> {
  const submitAt = wallMs();
  const id = await submitTask(peerUrl, i, run);
  const acceptedAt = wallMs();
  const until = Date.now() + 120_000;
  for (;;) {
    const res = await fetch(`${peerUrl}/v1/tasks/${id}?wait=${PEER_WAIT_S}`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    const view = (await res.json()) as { status?: string };
    if (res.status !== 200) throw new Error(`peer GET ${id}: ${res.status} ${JSON.stringify(view).slice(0, 200)}`);
    if (view.status === "completed") return { id, submitAt, acceptedAt, sawAt: wallMs() };
    if (PEER_FINAL.has(view.status ?? "") || Date.now() > until)
      throw new Error(`peer task ${id}: ${JSON.stringify(view).slice(0, 200)}`);
  }
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

/** Medians (ms) of where a task's time went; the stages overlap at the edges (the INSERT commits before the 202). */
interface Stages {
  /** The client's POST to its 202. */
  submitTo202: number;
  /** The row's created_at to its started_at: waiting in the queue, and the claim. */
  createdToStarted: number;
  /** started_at to completed_at minus the provider's latency: the provider submit, the polls, the completion write. */
  startedToCompletedLessProvider: number;
  /** completed_at to the client's answer showing it: the completion event, the long-poll's wake-up, the GET's answer. */
  completedToSeen: number;
  /** Tasks whose row had every timestamp. */
  rows: number;
}

/**
 * Per task, from the row's timestamps (Postgres now(): the statement's transaction start) and the
 * client's (the same machine's wall clock, sub-ms); the median of each stage.
 */
async function stages(sql: postgres.Sql, done: Seen[]): Promise<Stages> {
  const rows = await sql<{ id: string; created: number; started: number; completed: number }[]>`
    select id::text,
           extract(epoch from created_at) * 1000 as created,
           extract(epoch from started_at) * 1000 as started,
           extract(epoch from completed_at) * 1000 as completed
    from tasks where id = any(${done.map((d) => d.id)}::uuid[])
      and started_at is not null and completed_at is not null`;
  const byId = new Map(rows.map((r) => [r.id, r]));
  const paired = done.flatMap((d) => {
    const r = byId.get(d.id);
    return r ? [{ d, created: Number(r.created), started: Number(r.started), completed: Number(r.completed) }] : [];
  });
  const median = (f: (x: (typeof paired)[number]) => number) => quantile(paired.map(f), 0.5);
  return {
    submitTo202: median((x) => x.d.acceptedAt - x.d.submitAt),
    createdToStarted: median((x) => x.started - x.created),
    startedToCompletedLessProvider: median((x) => x.completed - x.started - PROVIDER_LATENCY_MS),
    completedToSeen: median((x) => x.d.sawAt - x.completed),
    rows: paired.length,
  };
}

const stagesText = (s: Stages) =>
  `submit -> 202 ${s.submitTo202.toFixed(1)} ms, created -> started ${s.createdToStarted.toFixed(1)} ms, started -> completed minus the provider ${s.startedToCompletedLessProvider.toFixed(1)} ms, completed -> client saw it ${s.completedToSeen.toFixed(1)} ms`;

/** The maximum rate the latency is measured at half of, and where it came from. */
async function maximumRate(ctx: BenchContext): Promise<{ maxRate: number; source: string }> {
  // A fixed rate (BENCH_LATENCY_RATE, tasks/s), to compare runs whose maxima differ.
  const fixed = envCount("BENCH_LATENCY_RATE", 0);
  if (fixed > 0) return { maxRate: fixed * 2, source: "BENCH_LATENCY_RATE" };
  const e2e = ctx.earlier.find((f) => f.bench === "end-to-end");
  if (e2e?.baseline?.label.startsWith("fair peer"))
    return { maxRate: e2e.baseline.value, source: "the fair peer's end-to-end figure of this run" };
  if (e2e !== undefined)
    return { maxRate: e2e.ours, source: "OUR end-to-end figure of this run (no fair peer figure was there)" };
  const tasks = Math.min(1500, e2eTasks());
  ctx.log(`latency: no end-to-end figure in this run; measuring the fair peer's maximum rate first (${tasks} tasks)`);
  const maxRate = (await peerThroughput(ctx, tasks)).perSecond;
  return { maxRate, source: `a ${tasks}-task end-to-end run of the fair peer made for it` };
}

/**
 * The rate is half of a warm maximum (end-to-end's 15,000-task warm-up): each side's processes
 * are warmed the same way first (submitted as fast as they go, run to completion), then a
 * hundred through its wait path.
 */
async function warmUp(
  sql: postgres.Sql,
  submit: (i: number) => Promise<unknown>,
  through: (i: number) => Promise<unknown>,
): Promise<void> {
  const jitWarm = envCount("BENCH_LATENCY_WARMUP", 15_000);
  const jit = await closedLoop(jitWarm, clients(), submit);
  if (jit.errors) throw new Error(`warm-up: ${jit.firstError}`);
  await waitForCompleted(sql, jitWarm, 60_000 + jitWarm * 20);
  const warm = await closedLoop(100, clients(), through);
  if (warm.errors) throw new Error(`warm-up: ${warm.firstError}`);
}

/** The settings both sides share. */
interface Plan {
  rate: number;
  count: number;
  solverConcurrency: number;
}

/** What one side measured: every task as its client saw it, and the stages' medians. */
interface Side {
  seen: Seen[];
  stages: Stages;
}

/** Ours, in a scope of its own: warm-up, the open loop, then the provider-direct client on the same emulator. */
async function measureOurs(ctx: BenchContext, plan: Plan): Promise<Side & { direct: number[] }> {
  const scope = ctx.scope.child();
  try {
    const p = await startPipeline(scope, ctx, {
      solvers: 1,
      emulator: { latencyMs: PROVIDER_LATENCY_MS, threads: Math.max(1000, plan.solverConcurrency) },
      solverEnv: {
        FIRST_POLL_MS: String(PROVIDER_LATENCY_MS),
        POLL_INTERVAL_MS: String(POLL_INTERVAL_MS),
        SOLVER_CONCURRENCY: String(plan.solverConcurrency),
      },
    });
    const through = (i: number, run: string) => throughGateway(p.gatewayUrl, i, run);
    await warmUp(
      p.db.sql,
      (i) => submitTask(p.gatewayUrl, i, "latency-jit"),
      (i) => through(i, "latency-warmup"),
    );
    const seen = settledValues(await openLoop(plan.count, plan.rate, (i) => through(i, "latency")), "pipeline");
    const base = settledValues(await openLoop(plan.count, plan.rate, (i) => direct(p.emulatorUrl, i)), "direct");
    return { seen, stages: await stages(p.db.sql, seen), direct: base };
  } finally {
    await scope.close();
  }
}

/** The fair peer, in a scope of its own, the same way (its worker at our solver's concurrency). */
async function measurePeer(ctx: BenchContext, plan: Plan): Promise<Side> {
  const scope: Scope = ctx.scope.child();
  try {
    const peer = await startPeer(scope, ctx, {
      latencyMs: PROVIDER_LATENCY_MS,
      threads: Math.max(1000, plan.solverConcurrency),
      concurrency: plan.solverConcurrency,
      pollIntervalMs: POLL_INTERVAL_MS,
    });
    const through = (i: number, run: string) => throughPeer(peer.gatewayUrl, i, run);
    await warmUp(
      peer.sql,
      (i) => submitTask(peer.gatewayUrl, i, "latency-jit"),
      (i) => through(i, "latency-warmup"),
    );
    const seen = settledValues(await openLoop(plan.count, plan.rate, (i) => through(i, "latency")), "fair peer");
    return { seen, stages: await stages(peer.sql, seen) };
  } finally {
    await scope.close();
  }
}

/** What a latency run measured. */
interface LatencyRun extends Plan {
  maxRate: number;
  source: string;
  ours: Side;
  peer: Side;
  direct: number[];
}

const spread = (ms: number[]) => ({
  p50: quantile(ms, 0.5),
  p90: quantile(ms, 0.9),
  p99: quantile(ms, 0.99),
  max: quantile(ms, 1),
});

function latencyNote(r: LatencyRun): string {
  const o = r.ours.seen.map(totalMs);
  const q = r.peer.seen.map(totalMs);
  const pq = (ms: number[]) => `${quantile(ms, 0.5).toFixed(0)}/${quantile(ms, 0.99).toFixed(0)}`;
  return `latency: ${r.count} tasks per side at ${r.rate.toFixed(0)}/s (open loop, the same offered rate for both; half of ${r.maxRate.toFixed(0)}/s from ${r.source}), each side on its own fresh system after ${envCount("BENCH_LATENCY_WARMUP", 15_000)} + 100 warm-up tasks; provider latency ${PROVIDER_LATENCY_MS} ms (emulator). Ours: @pipeline/client submit, then GET ?wait long-polls; FIRST_POLL_MS=${PROVIDER_LATENCY_MS}, POLL_INTERVAL_MS=${POLL_INTERVAL_MS}, SOLVER_CONCURRENCY=${r.solverConcurrency}. Fair peer (bench/baselines/peer-gateway.ts, peer-worker.ts): POST, then GET ?wait=${PEER_WAIT_S} (job.waitUntilFinished on a QueueEvents, then the row); its worker at concurrency ${r.solverConcurrency}, res.php at once then every ${POLL_INTERVAL_MS} ms. Overhead = (POST -> the answer showing completed) - ${PROVIDER_LATENCY_MS} ms. Totals p50/p99: ours ${pq(o)} ms, fair peer ${pq(q)} ms, client -> provider direct ${pq(r.direct)} ms. Where the time goes (medians per stage, the rows' timestamps against the client's): ours ${stagesText(r.ours.stages)}; fair peer ${stagesText(r.peer.stages)}.`;
}

/** The p50 and p99 overheads over the provider, ours against the fair peer; the provider-direct client as context. */
function latencyFigures(r: LatencyRun): Figure[] {
  const over = (ms: number[], q: number) => quantile(ms, q) - PROVIDER_LATENCY_MS;
  const ours = r.ours.seen.map(totalMs);
  const peer = r.peer.seen.map(totalMs);
  const vsPeer = ([0.5, 0.99] as const).map((q, k): Figure => {
    const o = over(ours, q);
    const b = over(peer, q);
    return {
      bench: "latency",
      figure: `latency overhead ${q === 0.5 ? "p50" : "p99"} vs the fair peer, same offered rate`,
      ours: o,
      unit: "ms",
      baseline: { label: "fair peer (Hono+BullMQ, GET ?wait)", value: b },
      ratio: o / b,
      target: "<= 1.0x",
      met: o / b <= 1,
      ...(k === 0 ? { note: latencyNote(r) } : {}),
    };
  });
  const context = ([0.5, 0.99] as const).map(
    (q): Figure => ({
      bench: "latency",
      figure: `${q === 0.5 ? "p50" : "p99"} overhead over the provider (context)`,
      ours: over(ours, q),
      unit: "ms",
      baseline: { label: "client -> provider direct", value: over(r.direct, q) },
      ratio: over(ours, q) / over(r.direct, q),
    }),
  );
  return [...vsPeer, ...context];
}

export const latency: Benchmark = {
  name: "latency",
  title: `submit -> completed minus a ${PROVIDER_LATENCY_MS} ms provider, ours (@pipeline/client: submit, long-poll) vs the fair peer (POST, GET ?wait on BullMQ QueueEvents) at the same rate, half the fair peer's end-to-end maximum`,
  async run(ctx) {
    const { maxRate, source } = await maximumRate(ctx);
    const rate = maxRate / 2;
    const count = Math.max(200, Math.min(envCount("BENCH_LATENCY_TASKS", 3000), Math.round(rate * 20)));
    // Room for every task the rate keeps in flight (Little's law: rate x ~0.25 s, twice over), so
    // the figure is the overhead, not a wait for a concurrency slot; the peer's worker gets the same.
    const solverConcurrency = Math.max(concurrency(), Math.ceil(rate * 0.5));
    const plan: Plan = { rate, count, solverConcurrency };
    ctx.log(
      `latency: ${count} tasks per side at ${rate.toFixed(0)}/s (half of ${maxRate.toFixed(0)}/s from ${source})`,
    );
    const ours = await measureOurs(ctx, plan);
    ctx.log(`latency: ours p50 ${quantile(ours.seen.map(totalMs), 0.5).toFixed(0)} ms; now the fair peer`);
    const peer = await measurePeer(ctx, plan);
    const r: LatencyRun = { ...plan, maxRate, source, ours, peer, direct: ours.direct };
    ctx.detail.latency = {
      rate,
      maxRate,
      source,
      count,
      solverConcurrency,
      providerLatencyMs: PROVIDER_LATENCY_MS,
      pipelineMs: spread(ours.seen.map(totalMs)),
      fairPeerMs: spread(peer.seen.map(totalMs)),
      directMs: spread(ours.direct),
      pipelineStageMedians: ours.stages,
      fairPeerStageMedians: peer.stages,
    };
    return latencyFigures(r);
  },
};
