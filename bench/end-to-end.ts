// 2. End to end: tasks per second from the first submit to the last `completed` row, our pipeline
// (gateway + solver + emulator at zero latency) against the fair peer (issue 13: a Hono gateway +
// BullMQ + a worker doing the same work: auth, validation, insert, enqueue, provider submit and
// polls, completion), and as context (a) a minimal JetStream -> Postgres worker and (b) BullMQ on
// Redis doing only INSERT + UPDATE.
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { jetstream } from "@nats-io/jetstream";
import { waitForPort } from "@pipeline/devstack";
import { createTestDatabase, natsEnv, PROVIDER_KEY, spawnApp, startTestNats } from "@pipeline/devstack/testing";
import { connectNats } from "@pipeline/shared/nats";
import { shardOf, taskSubject } from "@pipeline/shared/subjects";
import { Queue } from "bullmq";
import postgres from "postgres";
import type { BaselineTask } from "./baselines/task-row.ts";
import { checkpoint } from "./support/checkpoint.ts";
import { waitForCompleted } from "./support/completion.ts";
import { type BenchContext, type Benchmark, envCount } from "./support/context.ts";
import { cpuMeter, cpuText, perTask, postgresPids } from "./support/cpu.ts";
import { closedLoop } from "./support/load.ts";
import { startPeer } from "./support/peer.ts";
import { spawnEmulator, startPipeline, submitTask } from "./support/pipeline.ts";
import { stopProc, waitForLog } from "./support/processes.ts";
import { startRedis } from "./support/redis-server.ts";
import type { Figure } from "./support/report.ts";

/**
 * Tasks run to completion before the timed ones, by every system alike. 15,000, not 200: the
 * apps and the peer are long-running Bun processes, and JavaScriptCore tiers hot code up to its
 * optimizing FTL compiler by execution counts; in a process's first ~10,000 tasks its compiler
 * threads were a fifth of the gateway's and solver's CPU (perf, issue 13), and with a 200-task
 * warm-up the timed window measured that compilation more than the per-task work (ours has more
 * code to compile than the peer: 1.09-1.15x its CPU cold, 1.01x warm). `BENCH_E2E_WARMUP=200`
 * measures the cold start.
 */
const WARMUP = envCount("BENCH_E2E_WARMUP", 15_000);
/** Tasks in flight per worker process, ours and the baselines' alike. */
export const concurrency = () => envCount("BENCH_SOLVER_CONCURRENCY", 200);
export const e2eTasks = () => envCount("BENCH_E2E_TASKS", 3000);
export const clients = () => envCount("BENCH_CLIENTS", 32);
/** Alternating rounds of ours and the fair peer (ours, peer, then peer, ours...); each side's median round is reported. */
export const e2eRounds = () => envCount("BENCH_E2E_ROUNDS", 3);

/**
 * The round a side is judged by: its median by throughput (of an even count, the better of the
 * middle two). Best-of-two until 2026-12-07: a peer's two rounds once differed by 39% (1,481 and
 * 2,051/s), so one lucky round decided the ratio.
 */
export function medianRound<T extends { perSecond: number }>(rs: T[]): T {
  const sorted = [...rs].sort((a, b) => b.perSecond - a.perSecond);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

export interface Throughput {
  perSecond: number;
  /** CPU milliseconds per task by process group while the measured tasks ran (bench = the clients). */
  cpuMsPerTask: Record<string, number>;
  /** From the first submit to the poll that saw the last row completed. */
  elapsedMs: number;
  /** From the first submit to the last acceptance. */
  acceptMs: number;
  /**
   * Postgres row writes per task (warm-up and measured tasks alike): inserts + updates + deletes
   * of every table in pg_stat_user_tables, from before the warm-up to after every writing
   * process stopped (a live backend may hold its statistics up to 10 s; an exiting one flushes
   * them), minus the provider slot rows a solver creates once at start.
   */
  rowWritesPerTask: number;
  /** Postgres transactions committed per task (pg_stat_database.xact_commit, the bench's own reads included), same span. */
  commitsPerTask: number;
}

/**
 * Rows inserted, updated and deleted in the current database's public tables so far, every table
 * counted (the provider plan's block leases included: a few a second per solver, not per task).
 */
async function rowWrites(sql: postgres.Sql): Promise<{ writes: number; commits: number }> {
  const [r] = await sql<{ n: string; c: string }[]>`
    select (select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)
            from pg_stat_user_tables where schemaname = 'public')::bigint::text as n,
           (select xact_commit from pg_stat_database where datname = current_database())::bigint::text as c`;
  return { writes: Number(r?.n ?? 0), commits: Number(r?.c ?? 0) };
}

/** Waits until the bench's own connections (application_name 'bench') are the database's only backends: the others exited, so their statistics are flushed. */
async function othersGone(sql: postgres.Sql, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const [r] = await sql<
      { n: number }[]
    >`select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and application_name <> 'bench'`;
    if (r?.n === 0 || Date.now() > until) return;
    await Bun.sleep(100);
  }
}

/**
 * Times `count` tasks from the first submit to the last completion (the same `tasks` table
 * query for every system), after a warm-up of WARMUP tasks run to completion the same way.
 */
async function measure(
  ctx: BenchContext,
  sql: postgres.Sql,
  count: number,
  submit: (i: number) => Promise<unknown>,
  processes: Record<string, () => number[]>,
  stopWriters: () => Promise<void>,
  afterWarmup: () => Promise<void> = async () => {},
): Promise<Throughput> {
  await othersGone(sql, 2000);
  const writesBefore = await rowWrites(sql);
  const warm = await closedLoop(WARMUP, clients(), submit);
  if (warm.errors) throw new Error(`${warm.errors} warm-up submissions failed: ${warm.firstError}`);
  await waitForCompleted(sql, WARMUP, 60_000 + WARMUP * 20);
  await afterWarmup();
  await checkpoint(ctx.pgAdminUrl);
  const cpu = cpuMeter({ ...processes, postgres: () => postgresPids(ctx.pgDataDir) });
  cpu.start();
  const done = waitForCompleted(sql, WARMUP + count, 240_000);
  done.catch(() => {}); // awaited below; this only keeps a failed submit phase from leaving it unhandled
  const sent = await closedLoop(count, clients(), submit, WARMUP);
  if (sent.errors) throw new Error(`${sent.errors} of ${count} submissions failed: ${sent.firstError}`);
  const end = await done;
  const cpuMsPerTask = perTask(cpu.stop(), count);
  // What follows a completion (our slot release) lands within a few ms; the writers' backends
  // then exit with them, flushing their statistics.
  await Bun.sleep(200);
  await stopWriters();
  await othersGone(sql);
  const after = await rowWrites(sql);
  const per = (n: number) => Math.round((n * 100) / (WARMUP + count)) / 100;
  return {
    perSecond: (count * 1000) / (end - sent.startedAt),
    cpuMsPerTask,
    elapsedMs: end - sent.startedAt,
    acceptMs: sent.endedAt - sent.startedAt,
    rowWritesPerTask: per(after.writes - writesBefore.writes),
    commitsPerTask: per(after.commits - writesBefore.commits),
  };
}

/** What the provider saw of the measured tasks: calls per task and what it charged per 1,000 (emulator books). */
export interface ProviderFigures {
  /** Provider HTTP calls (in.php, accepted or not, + res.php) per measured task. */
  providerCallsPerTask: number;
  /** Micro-dollars the provider charged per 1,000 measured tasks. */
  microsPer1000: number;
}

/** The emulator's counters and books since its last reset (after the warm-up), per measured task. */
async function providerFigures(emulatorUrl: string, tasks: number): Promise<ProviderFigures> {
  const stats = (await (await fetch(`${emulatorUrl}/emulator/stats`)).json()) as {
    submissions: number;
    rejectedSubmissions: number;
    resCalls: number;
  };
  const books = (await (await fetch(`${emulatorUrl}/emulator/books`)).json()) as { totals: { chargedMicros: number } };
  return {
    providerCallsPerTask: (stats.submissions + stats.rejectedSubmissions + stats.resCalls) / tasks,
    microsPer1000: Math.round((books.totals.chargedMicros * 1000) / tasks),
  };
}

export interface PipelineThroughput extends Throughput, ProviderFigures {
  /** Claims beyond the first, over the completed rows (warm-up included). */
  redeliveries: number;
}

/** Our pipeline with `solvers` solver processes: gateway, solver(s), emulator at zero latency. */
export async function pipelineThroughput(
  ctx: BenchContext,
  o: { tasks: number; solvers: number; run: string },
): Promise<PipelineThroughput> {
  const scope = ctx.scope.child();
  try {
    const p = await startPipeline(scope, ctx, {
      solvers: o.solvers,
      emulator: { latencyMs: 0, threads: 1000 },
      solverEnv: { FIRST_POLL_MS: "0", POLL_INTERVAL_MS: "10", SOLVER_CONCURRENCY: String(concurrency()) },
    });
    const stopWriters = async () => void (await Promise.all([p.gateway, ...p.solvers].map((proc) => stopProc(proc))));
    const t = await measure(
      ctx,
      p.db.sql,
      o.tasks,
      (i) => submitTask(p.gatewayUrl, i, o.run),
      p.pids,
      stopWriters,
      () => p.resetEmulatorStats(),
    );
    const stats = await p.emulatorStats();
    const money = await providerFigures(p.emulatorUrl, o.tasks);
    const [row] = await p.db.sql<
      { extra: number }[]
    >`select (sum(attempts) - count(*))::int as extra from tasks where state = 'completed'`;
    if (stats.submissions !== o.tasks)
      ctx.log(`${o.run}: the emulator saw ${stats.submissions} submissions for ${o.tasks} tasks`);
    return {
      ...t,
      ...money,
      redeliveries: row?.extra ?? 0,
    };
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
    const worker = spawnApp(
      "jetstream-worker",
      "bench/baselines/jetstream-worker.ts",
      {
        NATS_URL: nats.url,
        ...natsEnv(nats, "admin"),
        DATABASE_URL: tdb.url,
        REGION: region,
        CONCURRENCY: String(concurrency()),
      },
      mkdtempSync(join(ctx.logDir, "baseline-")),
    );
    scope.defer("jetstream worker", () => stopProc(worker));
    await waitForLog(worker, "worker started");
    const nc = await connectNats(nats.url, "bench-publisher", nats.auth("admin"));
    scope.defer("publisher connection", () => nc.close());
    const js = jetstream(nc);
    const sql = postgres(tdb.url, { max: 2, onnotice: () => {}, connection: { application_name: "bench" } });
    scope.defer("bench pool", () => sql.end({ timeout: 5 }));
    const pids = {
      worker: () => [worker.pid],
      nats: () => [nats.pid()].filter((pid): pid is number => pid !== undefined),
    };
    return await measure(
      ctx,
      sql,
      tasks,
      async (i) => {
        const t = baselineTask(i, "jetstream");
        await js.publish(taskSubject(region, "normal", shardOf(t.id)), JSON.stringify(t), { msgID: t.id });
      },
      pids,
      () => stopProc(worker),
    );
  } finally {
    await scope.close();
  }
}

/**
 * The fair peer (issue 13): bench/baselines/peer-gateway.ts (Hono, Bearer key, zod, INSERT,
 * queue.add with jobId = task id, 202) and bench/baselines/peer-worker.ts (BullMQ, concurrency as
 * ours; marks the row solving, in.php, res.php at once then every 10 ms, completes it with the
 * token), on a redis-server of its own (AOF, fsync every second), an emulator of its own at zero
 * latency and a fresh database on the run's Postgres cluster. The clients send the same requests
 * as to our gateway (submitTask).
 */
export async function peerThroughput(ctx: BenchContext, tasks: number): Promise<Throughput & ProviderFigures> {
  const scope = ctx.scope.child();
  try {
    const peer = await startPeer(
      scope,
      { pgAdminUrl: ctx.pgAdminUrl, logDir: ctx.logDir },
      { latencyMs: 0, threads: 1000, concurrency: concurrency(), pollIntervalMs: 10 },
    );
    const t = await measure(
      ctx,
      peer.sql,
      tasks,
      (i) => submitTask(peer.gatewayUrl, i, "peer"),
      peer.pids,
      peer.stopWriters,
      // As for ours: the provider's counters and books cover the measured tasks only.
      async () => void (await fetch(`${peer.emulatorUrl}/emulator/reset`, { method: "POST" })),
    );
    return { ...t, ...(await providerFigures(peer.emulatorUrl, tasks)) };
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
    const worker = spawnApp(
      "bullmq-worker",
      "bench/baselines/bullmq-worker.ts",
      { REDIS_PORT: String(redis.port), DATABASE_URL: tdb.url, QUEUE: "tasks", CONCURRENCY: String(concurrency()) },
      mkdtempSync(join(ctx.logDir, "baseline-")),
    );
    scope.defer("bullmq worker", () => stopProc(worker));
    await waitForLog(worker, "worker started");
    const queue = new Queue<BaselineTask>("tasks", { connection: { host: "127.0.0.1", port: redis.port } });
    scope.defer("bullmq queue", () => queue.close());
    const sql = postgres(tdb.url, { max: 2, onnotice: () => {}, connection: { application_name: "bench" } });
    scope.defer("bench pool", () => sql.end({ timeout: 5 }));
    return await measure(
      ctx,
      sql,
      tasks,
      async (i) => {
        const t = baselineTask(i, "bullmq");
        await queue.add("solve", t, { jobId: t.id });
      },
      { worker: () => [worker.pid], redis: () => [redis.pid] },
      () => stopProc(worker),
    );
  } finally {
    await scope.close();
  }
}

/**
 * Ours and the fair peer in alternating rounds, each side's median round (by throughput)
 * reported with that round's CPU and writes: a shared 2-core machine's noise (another tenant's
 * burst during one run) moves one run's figures by 10-20%; the ingest benchmark does the same.
 */
async function alternatingRounds(
  ctx: BenchContext,
  tasks: number,
): Promise<{ oursRounds: PipelineThroughput[]; peerRounds: (Throughput & ProviderFigures)[] }> {
  const oursRounds: PipelineThroughput[] = [];
  const peerRounds: (Throughput & ProviderFigures)[] = [];
  // Which side goes first alternates too (ours-peer, peer-ours, ...): a run's first and last
  // measurements are the likeliest to meet a start-up or a neighbour's burst.
  const oursRound = async (r: number) => {
    const o = await pipelineThroughput(ctx, { tasks, solvers: 1, run: `e2e${r}` });
    ctx.log(
      `end-to-end round ${r + 1}: pipeline ${o.perSecond.toFixed(0)}/s, ${o.cpuMsPerTask.total} ms CPU/task (accepted in ${(o.acceptMs / 1000).toFixed(1)} s, done in ${(o.elapsedMs / 1000).toFixed(1)} s)`,
    );
    oursRounds.push(o);
  };
  const peerRound = async (r: number) => {
    const q = await peerThroughput(ctx, tasks);
    ctx.log(
      `end-to-end round ${r + 1}: fair peer ${q.perSecond.toFixed(0)}/s, ${q.cpuMsPerTask.total} ms CPU/task (accepted in ${(q.acceptMs / 1000).toFixed(1)} s, done in ${(q.elapsedMs / 1000).toFixed(1)} s)`,
    );
    peerRounds.push(q);
  };
  for (let r = 0; r < e2eRounds(); r++) {
    const order = r % 2 === 0 ? [oursRound, peerRound] : [peerRound, oursRound];
    for (const side of order) await side(r);
  }
  return { oursRounds, peerRounds };
}

/** What the end-to-end benchmark measured: the median round of each side, every round, and the context baselines. */
interface EndToEndRun {
  tasks: number;
  ours: PipelineThroughput;
  peer: Throughput & ProviderFigures;
  oursRounds: PipelineThroughput[];
  peerRounds: (Throughput & ProviderFigures)[];
  js: Throughput;
  bull: Throughput;
}

/** Ours against the fair peer: throughput, CPU per task and row writes per task. */
function peerFigures(e: EndToEndRun): Figure[] {
  const { tasks, ours, peer, oursRounds, peerRounds } = e;
  const roundsText = `${oursRounds.length} alternating rounds (ours first in odd rounds, the peer in even ones), the median round of each side reported (ours ${oursRounds.map((x) => `${x.perSecond.toFixed(0)}/s at ${x.cpuMsPerTask.total} ms`).join(", ")}; fair peer ${peerRounds.map((x) => `${x.perSecond.toFixed(0)}/s at ${x.cpuMsPerTask.total} ms`).join(", ")}).`;
  const how = `${tasks} tasks after ${WARMUP} warm-up, ${clients()} submitting clients, ${concurrency()} in flight per worker; emulator latency 0, FIRST_POLL_MS=0, POLL_INTERVAL_MS=10; ${roundsText}`;
  const cpuRatio = ours.cpuMsPerTask.total! / peer.cpuMsPerTask.total!;
  return [
    {
      bench: "end-to-end",
      figure: "tasks/s, submit -> completed",
      ours: ours.perSecond,
      unit: "/s",
      baseline: { label: "fair peer (Hono+BullMQ)", value: peer.perSecond },
      ratio: ours.perSecond / peer.perSecond,
      target: ">= 1.25x",
      met: ours.perSecond / peer.perSecond >= 1.25,
      note: `end-to-end: ${how} Ours accepted all in ${(ours.acceptMs / 1000).toFixed(1)} s and finished in ${(ours.elapsedMs / 1000).toFixed(1)} s; ${ours.providerCallsPerTask.toFixed(2)} provider calls/task, ${ours.redeliveries} redeliveries. The fair peer (bench/baselines/peer-*.ts): a Hono gateway (Bearer key, zod, INSERT, queue.add with jobId, 202) and a BullMQ worker (mark solving, in.php, res.php at once then every 10 ms, complete with the token), Redis AOF everysec; it accepted all in ${(peer.acceptMs / 1000).toFixed(1)} s and finished in ${(peer.elapsedMs / 1000).toFixed(1)} s. CPU ms per task by process: ours ${cpuText(ours.cpuMsPerTask)}; fair peer ${cpuText(peer.cpuMsPerTask)}.`,
    },
    {
      bench: "end-to-end",
      figure: "CPU ms per task, all processes",
      ours: ours.cpuMsPerTask.total!,
      unit: "ms",
      baseline: { label: "fair peer", value: peer.cpuMsPerTask.total! },
      ratio: cpuRatio,
      target: "<= 0.80x",
      met: cpuRatio <= 0.8,
    },
    {
      bench: "end-to-end",
      figure: "Postgres row writes per task",
      ours: ours.rowWritesPerTask,
      unit: "",
      baseline: { label: "fair peer", value: peer.rowWritesPerTask },
      ratio: ours.rowWritesPerTask / peer.rowWritesPerTask,
      target: "<= 3",
      met: ours.rowWritesPerTask <= 3,
      note: `end-to-end: n_tup_ins + n_tup_upd + n_tup_del of every table (pg_stat_user_tables) from before the warm-up to after the writing processes stopped, per task (warm-up included); every lease renewal, provider-plan block lease and release counts. The fair peer writes 3 (insert, solving, completed); the JetStream loop and BullMQ context rows 2 each (measured ${e.js.rowWritesPerTask} and ${e.bull.rowWritesPerTask}). Commits per task (pg_stat_database.xact_commit, the bench's completion polls included): ours ${ours.commitsPerTask}, fair peer ${peer.commitsPerTask}.`,
    },
    {
      bench: "end-to-end",
      figure: "provider calls per solved task",
      ours: Math.round(ours.providerCallsPerTask * 100) / 100,
      unit: "",
      baseline: { label: "fair peer", value: Math.round(peer.providerCallsPerTask * 100) / 100 },
      ratio: ours.providerCallsPerTask / peer.providerCallsPerTask,
      target: "<= 1.00x",
      met: ours.providerCallsPerTask <= peer.providerCallsPerTask,
      note: "end-to-end: the emulator's in.php (accepted or not) and res.php calls over the measured tasks (its counters reset after the warm-up), both sides at the same poll timing (first poll at once, then every 10 ms); ours reads each answer's price with get2 (PROVIDER_PRICE_READ), a bulk-polled answer once more.",
    },
    {
      bench: "end-to-end",
      figure: "money per 1,000 solved tasks",
      ours: ours.microsPer1000 / 1_000_000,
      unit: "$",
      baseline: { label: "fair peer", value: peer.microsPer1000 / 1_000_000 },
      ratio: ours.microsPer1000 / peer.microsPer1000,
      target: "<= 1.00x",
      met: ours.microsPer1000 <= peer.microsPer1000,
      note: "end-to-end: what the emulator charged (its books, at 2Captcha's list prices, one charge per answer read) for the measured tasks, per 1,000; above 1.00x means answers paid twice.",
    },
  ];
}

/** Ours against the context baselines (no provider, INSERT + UPDATE per task). */
function contextFigures({ ours, js, bull }: EndToEndRun): Figure[] {
  return [
    {
      bench: "end-to-end",
      figure: "tasks/s, submit -> completed",
      ours: ours.perSecond,
      unit: "/s",
      baseline: { label: "JetStream->PG loop", value: js.perSecond },
      ratio: ours.perSecond / js.perSecond,
      note: `end-to-end, context rows: these baselines call no provider and do INSERT + UPDATE per task (less work than ours or the peer's). CPU ms per task: JetStream loop ${cpuText(js.cpuMsPerTask)}; BullMQ ${cpuText(bull.cpuMsPerTask)}.`,
    },
    {
      bench: "end-to-end",
      figure: "tasks/s, submit -> completed",
      ours: ours.perSecond,
      unit: "/s",
      baseline: { label: "BullMQ on Redis", value: bull.perSecond },
      ratio: ours.perSecond / bull.perSecond,
    },
  ];
}

export const endToEnd: Benchmark = {
  name: "end-to-end",
  title:
    "tasks/s from first submit to last completion vs the fair peer (Hono + BullMQ + worker); a minimal JetStream worker and BullMQ as context",
  async run(ctx) {
    const tasks = e2eTasks();
    const { oursRounds, peerRounds } = await alternatingRounds(ctx, tasks);
    const ours = medianRound(oursRounds);
    const peer = medianRound(peerRounds);
    const js = await jetstreamThroughput(ctx, tasks);
    ctx.log(`end-to-end: minimal JetStream worker ${js.perSecond.toFixed(0)}/s`);
    const bull = await bullmqThroughput(ctx, tasks);
    ctx.log(`end-to-end: BullMQ ${bull.perSecond.toFixed(0)}/s`);
    ctx.detail.endToEnd = {
      tasks,
      clients: clients(),
      concurrency: concurrency(),
      warmup: WARMUP,
      pipeline: ours,
      fairPeer: peer,
      rounds: { pipeline: oursRounds, fairPeer: peerRounds },
      jetstreamWorker: js,
      bullmq: bull,
    };
    const e: EndToEndRun = { tasks, ours, peer, oursRounds, peerRounds, js, bull };
    return [...peerFigures(e), ...contextFigures(e)];
  },
};
