// `bun bench/profile.ts [tasks]`: where the CPU per task goes, for issue 13's work. Runs the
// end-to-end benchmark's pipeline (gateway + one solver + emulator at zero latency, the same
// settings) on a Postgres cluster of its own with pg_stat_statements loaded, and prints, over the
// measured tasks: CPU ms per task by process (two decimals), every statement's calls and
// execution time per task (largest first), the `tasks` table's updates and how many were HOT,
// and the JetStream messages per task by stream. Not a benchmark (no baseline, no ratio): a
// profile to decide what to make cheaper next.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { freePort, startPostgres } from "@pipeline/devstack";
import { connectNats } from "@pipeline/shared/nats";
import { waitForCompleted } from "./support/completion.ts";
import { envSettings } from "./support/context.ts";
import { cpuMeter, postgresPids } from "./support/cpu.ts";
import { closedLoop } from "./support/load.ts";
import { startPipeline, submitTask } from "./support/pipeline.ts";
import { Scope } from "./support/scope.ts";

// Warm-up tasks before the profiled ones (as the benchmark's: JIT tiers by execution counts); PROFILE_WARMUP=200 profiles a cold process.
const WARMUP = Number(process.env.PROFILE_WARMUP ?? 15_000);
if (!Number.isInteger(WARMUP) || WARMUP <= 0)
  throw new Error(`PROFILE_WARMUP: a positive integer, not ${process.env.PROFILE_WARMUP}`);
const tasks = Number(process.argv[2] ?? 3000);
if (!Number.isInteger(tasks) || tasks <= 0) throw new Error(`tasks: a positive integer, not ${process.argv[2]}`);
const explain = process.env.PROFILE_EXPLAIN ? Number(process.env.PROFILE_EXPLAIN) : undefined;
if (explain !== undefined && !(explain >= 0))
  throw new Error(`PROFILE_EXPLAIN: milliseconds (a number >= 0), not ${process.env.PROFILE_EXPLAIN}`);
// PROFILE_SOLVER_ENV='{"GC_GROWTH_MB":"64"}': settings of the solver to compare.
const solverEnv = envSettings("PROFILE_SOLVER_ENV");
const log = (m: string) => console.error(`[profile] ${m}`);
const pgDir = mkdtempSync(join(tmpdir(), "pipeline-profile-pg-"));
const logDir = mkdtempSync(join(tmpdir(), "pipeline-profile-logs-"));
const pg = await startPostgres({
  dataDir: pgDir,
  port: await freePort(),
  fast: false,
  settings: [
    `shared_preload_libraries=pg_stat_statements${explain ? ",auto_explain" : ""}`,
    "pg_stat_statements.track=all",
    "pg_stat_statements.max=1000",
    // PROFILE_EXPLAIN=<ms>: the plans of statements slower than that, with actual rows and timings, into the server log (printed at the end).
    ...(explain
      ? [
          `auto_explain.log_min_duration=${explain}`,
          "auto_explain.log_analyze=on",
          "auto_explain.log_buffers=on",
          "auto_explain.log_nested_statements=on",
        ]
      : []),
  ],
  log,
});
const scope = new Scope(log);
try {
  const p = await startPipeline(
    scope,
    { pgAdminUrl: pg.adminUrl, logDir },
    {
      solvers: 1,
      emulator: { latencyMs: 0, threads: 1000 },
      solverEnv: { FIRST_POLL_MS: "0", POLL_INTERVAL_MS: "10", SOLVER_CONCURRENCY: "200", ...solverEnv },
    },
  );
  const sql = p.db.sql;
  await sql`create extension if not exists pg_stat_statements`;
  // PROFILE_SQL='drop index tasks_sitekey_idx': SQL run once the schema is there, before the
  // warm-up (what an index or a setting costs per task: compare runs with and without it).
  if (process.env.PROFILE_SQL) await sql.unsafe(process.env.PROFILE_SQL);
  const run = `profile-${Date.now()}`;
  const submit = (i: number) => submitTask(p.gatewayUrl, i, run);
  await closedLoop(WARMUP, 32, submit);
  await waitForCompleted(sql, WARMUP, 60_000 + WARMUP * 20);
  const nc = await connectNats(p.natsUrl, "profile", p.natsAdmin);
  scope.defer("profile connection", () => nc.close());
  const jsm = await jetstreamManager(nc);
  const streamCounts = async () => {
    const out: Record<string, number> = {};
    for await (const s of jsm.streams.list()) out[s.config.name] = Number(s.state.last_seq);
    return out;
  };
  const tableStats = async () =>
    (
      await sql<
        { upd: string; hot: string; ins: string }[]
      >`select n_tup_upd::text as upd, n_tup_hot_upd::text as hot, n_tup_ins::text as ins from pg_stat_user_tables where relname = 'tasks'`
    )[0]!;
  await sql`select pg_stat_statements_reset()`;
  const streamsBefore = await streamCounts();
  const tBefore = await tableStats();
  const cpu = cpuMeter({ ...p.pids, postgres: () => postgresPids(pg.dataDir) });
  cpu.start();
  const done = waitForCompleted(sql, WARMUP + tasks, 240_000);
  const sent = await closedLoop(tasks, 32, submit, WARMUP);
  const end = await done;
  const seconds = cpu.stop();
  await Bun.sleep(1000);
  const streamsAfter = await streamCounts();
  const tAfter = await tableStats();
  const per = (n: number) => (n / tasks).toFixed(2);
  console.log(
    `${tasks} tasks in ${((end - sent.startedAt) / 1000).toFixed(2)} s (${Math.round((tasks * 1000) / (end - sent.startedAt))}/s), ${sent.errors} failed submissions`,
  );
  console.log("\nCPU ms per task by process:");
  const total = Object.values(seconds).reduce((a, b) => a + b, 0);
  for (const [k, s] of Object.entries(seconds).sort((a, b) => b[1] - a[1]))
    console.log(`  ${k.padEnd(10)} ${((s * 1000) / tasks).toFixed(3)}`);
  console.log(`  ${"total".padEnd(10)} ${((total * 1000) / tasks).toFixed(3)}`);
  const peak = (pid: number) =>
    Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;
  console.log(
    `peak RSS: solver ${p.pids
      .solvers()
      .map((pid) => `${peak(pid).toFixed(0)} MB`)
      .join(", ")}, gateway ${peak(p.pids.gateway()[0]!).toFixed(0)} MB`,
  );
  console.log(
    `\ntasks table (stats lag up to 1 s): ${per(Number(tAfter.ins) - Number(tBefore.ins))} inserts, ${per(Number(tAfter.upd) - Number(tBefore.upd))} updates per task, of which HOT ${per(Number(tAfter.hot) - Number(tBefore.hot))}`,
  );
  console.log("\nJetStream messages per task by stream:");
  for (const [name, seq] of Object.entries(streamsAfter))
    console.log(`  ${name.padEnd(20)} ${per(seq - (streamsBefore[name] ?? 0))}`);
  const stmts = await sql<{ query: string; calls: string; ms: number; rows: string }[]>`
    select regexp_replace(query, '\\s+', ' ', 'g') as query, calls::text, total_exec_time as ms, rows::text
    from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())
    order by total_exec_time desc limit 25`;
  const allMs = stmts.reduce((a, s) => a + s.ms, 0);
  console.log(
    `\nstatements by execution time (top 25, ${((allMs * 1000) / tasks).toFixed(0)} µs per task in all of them; calls and µs per task):`,
  );
  for (const s of stmts)
    console.log(
      `  ${per(Number(s.calls)).padStart(6)} calls ${((s.ms * 1000) / tasks).toFixed(1).padStart(7)} µs ${per(Number(s.rows)).padStart(6)} rows  ${s.query.slice(0, 150)}`,
    );
  if (explain !== undefined) {
    const text = readFileSync(join(pgDir, "server.log"), "utf8");
    const plans = text.split(/\n(?=\S)/).filter((e) => e.includes("duration:") && e.includes("plan:"));
    console.log(`\n${plans.length} plans slower than ${explain} ms; the last 6:\n${plans.slice(-6).join("\n")}`);
  }
} finally {
  await scope.close();
  await pg.stop("fast").catch(() => {});
  rmSync(pgDir, { recursive: true, force: true });
  rmSync(logDir, { recursive: true, force: true });
}
