// `npm run bench` (or `bun bench/run.ts [name...]`): starts one Postgres cluster for the run,
// runs the benchmarks (each starts and stops its own servers and processes, on fresh databases),
// prints every figure next to its same-run baseline, and writes bench/results/<timestamp>.json.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { findNatsServer, freePort, type PostgresHandle, redactPassword, startPostgres } from "@pipeline/devstack";
import { adaptive } from "./adaptive.ts";
import { endToEnd } from "./end-to-end.ts";
import { fairShare } from "./fair-share.ts";
import { inFlight } from "./in-flight.ts";
import { ingest } from "./ingest.ts";
import { latency } from "./latency.ts";
import { needBy } from "./need-by.ts";
import { scaling } from "./scaling.ts";
import type { Benchmark } from "./support/context.ts";
import { type BenchError, type Figure, renderTable, writeResults } from "./support/report.ts";
import { Scope } from "./support/scope.ts";

const ALL: Benchmark[] = [ingest, endToEnd, inFlight, latency, scaling, adaptive, needBy, fairShare];
const log = (m: string) => console.error(`[bench] ${m}`);

const names = process.argv.slice(2).filter((a) => !a.startsWith("-"));
const unknown = names.filter((n) => !ALL.some((b) => b.name === n));
if (unknown.length) {
  console.error(
    `unknown benchmark ${unknown.join(", ")}; one or more of: ${ALL.map((b) => `${b.name} (${b.title})`).join("; ")}`,
  );
  process.exit(2);
}
const selected = names.length ? ALL.filter((b) => names.includes(b.name)) : ALL;

/** The 1-minute load average: above the CPU count, something else competes for the machine. */
const loadAverage = () => Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0]);

const version = (cmd: string, args: string[]) => {
  try {
    return execFileSync(cmd, args, { encoding: "utf8" }).trim().split("\n")[0];
  } catch {
    return "unknown";
  }
};

const t0 = performance.now();
const figures: Figure[] = [];
const errors: BenchError[] = [];
const timings: Record<string, number> = {};
const detail: Record<string, unknown> = {};
const loads: Record<string, { before: number; after?: number }> = {};
detail.loadAverage = loads;
let current: Scope | undefined;
let pg: PostgresHandle | undefined;
const pgDir = mkdtempSync(join(tmpdir(), "pipeline-bench-pg-"));
const logDir = mkdtempSync(join(tmpdir(), "pipeline-bench-logs-"));

let interrupted = false;
let shuttingDown: Promise<void> | undefined;
/** Stops the running benchmark's processes and servers, then Postgres; once, whoever asks first. */
const shutdown = () => (shuttingDown ??= stopEverything());
async function stopEverything(): Promise<void> {
  await current?.close();
  await pg?.stop("fast").catch((err: Error) => log(`stopping Postgres failed: ${err.message}`));
  rmSync(pgDir, { recursive: true, force: true });
  if (errors.length === 0) rmSync(logDir, { recursive: true, force: true });
  else log(`process logs kept in ${logDir}`);
}
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => {
    log(`${sig}: stopping everything`);
    interrupted = true;
    errors.push({ bench: "run", message: `interrupted by ${sig}` });
    void shutdown().then(() => process.exit(130));
  });
}

try {
  pg = await startPostgres({ dataDir: pgDir, port: await freePort(), fast: false, log });
  log(
    `Postgres ${pg.bins.version} on ${redactPassword(pg.adminUrl)} (fsync on), benchmarks: ${selected.map((b) => b.name).join(", ")}`,
  );
  for (const b of selected) {
    if (interrupted) break;
    const scope = (current = new Scope(log));
    const started = performance.now();
    loads[b.name] = { before: loadAverage() };
    log(`${b.name}: ${b.title} (load average ${loads[b.name]!.before} on ${cpus().length} CPUs)`);
    try {
      const got = await b.run({
        pgAdminUrl: pg.adminUrl,
        pgDataDir: pg.dataDir,
        logDir,
        scope,
        log,
        earlier: figures,
        detail,
      });
      figures.push(...got);
      console.log(`${renderTable(got)}\n`);
    } catch (err) {
      const message = (err as Error).stack ?? String(err);
      errors.push({ bench: b.name, message });
      log(`${b.name} FAILED: ${message}`);
    } finally {
      await scope.close();
      current = undefined;
      timings[b.name] = Math.round((performance.now() - started) / 100) / 10;
      loads[b.name]!.after = loadAverage();
      log(`${b.name}: ${timings[b.name]} s`);
    }
  }
} finally {
  await shutdown();
}

const wallS = Math.round((performance.now() - t0) / 100) / 10;
console.log(`\n${renderTable(figures)}`);
// Only the load before the first benchmark tells of other work: during the run the 1-minute
// load average counts the bench's own processes (10,000 tasks in flight alone lift it to ~10).
const atStart = Object.values(loads)[0]?.before ?? 0;
if (atStart >= cpus().length)
  console.log(
    `note: the 1-minute load average was ${atStart} on ${cpus().length} CPUs when the run began; other work competed for the machine, so absolute figures are low (the same-run ratios are less affected).`,
  );
for (const e of errors) console.log(`FAILED ${e.bench}: ${e.message.split("\n")[0]}`);
const file = writeResults(join(import.meta.dir, "results"), {
  startedAt: new Date(Date.now() - wallS * 1000).toISOString(),
  command: `bun bench/run.ts ${names.join(" ")}`.trim(),
  wallSeconds: wallS,
  secondsPerBenchmark: timings,
  machine: {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    bun: Bun.version,
    natsServer: findNatsServer().version,
    postgres: pg?.bins.version,
    redis: version(process.env.REDIS_SERVER_BIN ?? "/usr/bin/redis-server", ["--version"]),
  },
  figures,
  errors,
  detail,
});
console.log(
  `\nwall time ${wallS} s; nats-server ${findNatsServer().version}, Bun ${Bun.version}, PostgreSQL ${pg?.bins.version ?? "?"}; results in ${file}`,
);
process.exit(errors.length ? 1 : 0);
