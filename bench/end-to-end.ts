// 2. End to end: tasks per second from the first submit to the last `completed` row, our pipeline
// (gateway + solver + emulator at zero latency) against (a) a minimal JetStream -> Postgres worker
// and (b) BullMQ on Redis doing the same Postgres INSERT + UPDATE.
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { jetstream } from "@nats-io/jetstream";
import { Queue } from "bullmq";
import postgres from "postgres";
import { connectNats } from "@pipeline/shared/nats";
import { shardOf, taskSubject } from "@pipeline/shared/subjects";
import { createTestDatabase, natsEnv, startTestNats } from "@pipeline/shared/testing";
import { spawnApp } from "../tests/harness.ts";
import type { BaselineTask } from "./baselines/task-row.ts";
import { waitForCompleted } from "./support/completion.ts";
import { cpuMeter, cpuText, perTask, postgresPids } from "./support/cpu.ts";
import { envCount, type Benchmark, type BenchContext } from "./support/context.ts";
import { closedLoop } from "./support/load.ts";
import { startPipeline, submitTask } from "./support/pipeline.ts";
import { stopProc, waitForLog } from "./support/processes.ts";
import { startRedis } from "./support/redis-server.ts";

const WARMUP = 200;
/** Tasks in flight per worker process, ours and the baselines' alike. */
export const concurrency = () => envCount("BENCH_SOLVER_CONCURRENCY", 200);
export const e2eTasks = () => envCount("BENCH_E2E_TASKS", 3000);
export const clients = () => envCount("BENCH_CLIENTS", 32);

export interface Throughput {
  perSecond: number;
  /** CPU milliseconds per task by process group while the measured tasks ran (bench = the clients). */
  cpuMsPerTask: Record<string, number>;
  /** From the first submit to the poll that saw the last row completed. */
  elapsedMs: number;
  /** From the first submit to the last acceptance. */
  acceptMs: number;
}

/**
 * Times `count` tasks from the first submit to the last completion (the same `tasks` table
 * query for every system), after a warm-up of WARMUP tasks run to completion the same way.
 */
async function measure(ctx: BenchContext, sql: postgres.Sql, count: number, submit: (i: number) => Promise<unknown>, processes: Record<string, () => number[]>, afterWarmup: () => Promise<void> = async () => {}): Promise<Throughput> {
  const warm = await closedLoop(WARMUP, clients(), submit);
  if (warm.errors) throw new Error(`${warm.errors} warm-up submissions failed: ${warm.firstError}`);
  await waitForCompleted(sql, WARMUP, 60_000);
  await afterWarmup();
  const cpu = cpuMeter({ ...processes, postgres: () => postgresPids(ctx.pgDataDir) });
  cpu.start();
  const done = waitForCompleted(sql, WARMUP + count, 240_000);
  done.catch(() => {}); // awaited below; this only keeps a failed submit phase from leaving it unhandled
  const sent = await closedLoop(count, clients(), submit, WARMUP);
  if (sent.errors) throw new Error(`${sent.errors} of ${count} submissions failed: ${sent.firstError}`);
  const end = await done;
  const cpuMsPerTask = perTask(cpu.stop(), count);
  return { perSecond: (count * 1000) / (end - sent.startedAt), cpuMsPerTask, elapsedMs: end - sent.startedAt, acceptMs: sent.endedAt - sent.startedAt };
}

export interface PipelineThroughput extends Throughput {
  /** Provider HTTP calls (in.php, accepted or not, + res.php) per measured task. */
  providerCallsPerTask: number;
  /** Claims beyond the first, over the completed rows (warm-up included). */
  redeliveries: number;
}

/** Our pipeline with `solvers` solver processes: gateway, solver(s), emulator at zero latency. */
export async function pipelineThroughput(ctx: BenchContext, o: { tasks: number; solvers: number; run: string }): Promise<PipelineThroughput> {
  const scope = ctx.scope.child();
  try {
    const p = await startPipeline(scope, ctx, {
      solvers: o.solvers,
      emulator: { latencyMs: 0, threads: 1000 },
      solverEnv: { FIRST_POLL_MS: "0", POLL_INTERVAL_MS: "10", SOLVER_CONCURRENCY: String(concurrency()) },
    });
    const t = await measure(ctx, p.db.sql, o.tasks, (i) => submitTask(p.gatewayUrl, i, o.run), p.pids, () => p.resetEmulatorStats());
    const stats = await p.emulatorStats();
    const [row] = await p.db.sql<{ extra: number }[]>`select (sum(attempts) - count(*))::int as extra from tasks where state = 'completed'`;
    if (stats.submissions !== o.tasks) ctx.log(`${o.run}: the emulator saw ${stats.submissions} submissions for ${o.tasks} tasks`);
    return { ...t, providerCallsPerTask: (stats.submissions + stats.rejectedSubmissions + stats.resCalls) / o.tasks, redeliveries: row?.extra ?? 0 };
  } finally {
    await scope.close();
  }
}

const baselineTask = (i: number, run: string): BaselineTask => ({
  id: Bun.randomUUIDv7(),
  type: "turnstile",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://bench.example.com/${run}/${i}` },
});

/** Baseline (a): bench/baselines/jetstream-worker.ts; the bench publishes with Nats-Msg-Id and awaits each PubAck. */
async function jetstreamThroughput(ctx: BenchContext, tasks: number): Promise<Throughput> {
  const scope = ctx.scope.child();
  try {
    const region = "baseline";
    const nats = await startTestNats();
    scope.defer("nats-server", () => nats.dispose());
    const tdb = await createTestDatabase("bench", ctx.pgAdminUrl);
    scope.defer(`database ${tdb.name}`, () => tdb.drop());
    const worker = spawnApp("jetstream-worker", "bench/baselines/jetstream-worker.ts", { NATS_URL: nats.url, ...natsEnv(nats, "admin"), DATABASE_URL: tdb.url, REGION: region, CONCURRENCY: String(concurrency()) }, mkdtempSync(join(ctx.logDir, "baseline-")));
    scope.defer("jetstream worker", () => stopProc(worker));
    await waitForLog(worker, "worker started");
    const nc = await connectNats(nats.url, "bench-publisher", nats.auth("admin"));
    scope.defer("publisher connection", () => nc.close());
    const js = jetstream(nc);
    const sql = postgres(tdb.url, { max: 2, onnotice: () => {} });
    scope.defer("bench pool", () => sql.end({ timeout: 5 }));
    const pids = { worker: () => [worker.pid], nats: () => [nats.pid()].filter((pid): pid is number => pid !== undefined) };
    return await measure(ctx, sql, tasks, async (i) => {
      const t = baselineTask(i, "jetstream");
      await js.publish(taskSubject(region, "normal", shardOf(t.id)), JSON.stringify(t), { msgID: t.id });
    }, pids);
  } finally {
    await scope.close();
  }
}

/** Baseline (b): bench/baselines/bullmq-worker.ts on a redis-server of its own (AOF, fsync every second). */
async function bullmqThroughput(ctx: BenchContext, tasks: number): Promise<Throughput> {
  const scope = ctx.scope.child();
  try {
    const redis = await startRedis(scope);
    const tdb = await createTestDatabase("bench", ctx.pgAdminUrl);
    scope.defer(`database ${tdb.name}`, () => tdb.drop());
    const worker = spawnApp("bullmq-worker", "bench/baselines/bullmq-worker.ts", { REDIS_PORT: String(redis.port), DATABASE_URL: tdb.url, QUEUE: "tasks", CONCURRENCY: String(concurrency()) }, mkdtempSync(join(ctx.logDir, "baseline-")));
    scope.defer("bullmq worker", () => stopProc(worker));
    await waitForLog(worker, "worker started");
    const queue = new Queue<BaselineTask>("tasks", { connection: { host: "127.0.0.1", port: redis.port } });
    scope.defer("bullmq queue", () => queue.close());
    const sql = postgres(tdb.url, { max: 2, onnotice: () => {} });
    scope.defer("bench pool", () => sql.end({ timeout: 5 }));
    return await measure(ctx, sql, tasks, async (i) => {
      const t = baselineTask(i, "bullmq");
      await queue.add("solve", t, { jobId: t.id });
    }, { worker: () => [worker.pid], redis: () => [redis.pid] });
  } finally {
    await scope.close();
  }
}

export const endToEnd: Benchmark = {
  name: "end-to-end",
  title: "tasks/s from first submit to last completion vs a minimal JetStream worker and BullMQ",
  async run(ctx) {
    const tasks = e2eTasks();
    const ours = await pipelineThroughput(ctx, { tasks, solvers: 1, run: "e2e" });
    ctx.log(`end-to-end: pipeline ${ours.perSecond.toFixed(0)}/s (accepted in ${(ours.acceptMs / 1000).toFixed(1)} s, done in ${(ours.elapsedMs / 1000).toFixed(1)} s)`);
    const js = await jetstreamThroughput(ctx, tasks);
    ctx.log(`end-to-end: minimal JetStream worker ${js.perSecond.toFixed(0)}/s`);
    const bull = await bullmqThroughput(ctx, tasks);
    ctx.log(`end-to-end: BullMQ ${bull.perSecond.toFixed(0)}/s`);
    ctx.detail.endToEnd = { tasks, clients: clients(), concurrency: concurrency(), warmup: WARMUP, pipeline: ours, jetstreamWorker: js, bullmq: bull };
    const how = `${tasks} tasks after ${WARMUP} warm-up, ${clients()} submitting clients, ${concurrency()} in flight per worker; emulator latency 0, FIRST_POLL_MS=0, POLL_INTERVAL_MS=10.`;
    return [
      {
        bench: "end-to-end",
        figure: "tasks/s, submit -> completed",
        ours: ours.perSecond,
        unit: "/s",
        baseline: { label: "JetStream->PG loop", value: js.perSecond },
        ratio: ours.perSecond / js.perSecond,
        note: `end-to-end: ${how} Ours accepted all in ${(ours.acceptMs / 1000).toFixed(1)} s and finished in ${(ours.elapsedMs / 1000).toFixed(1)} s; ${ours.providerCallsPerTask.toFixed(2)} provider calls/task, ${ours.redeliveries} redeliveries. Baselines: INSERT + UPDATE per task, no provider call. CPU ms per task: ours ${cpuText(ours.cpuMsPerTask)}; JetStream loop ${cpuText(js.cpuMsPerTask)}; BullMQ ${cpuText(bull.cpuMsPerTask)}.`,
      },
      {
        bench: "end-to-end",
        figure: "tasks/s, submit -> completed",
        ours: ours.perSecond,
        unit: "/s",
        baseline: { label: "BullMQ on Redis", value: bull.perSecond },
        ratio: ours.perSecond / bull.perSecond,
        target: ">= 2.50x",
        met: ours.perSecond / bull.perSecond >= 2.5,
      },
    ];
  },
};
