// `bun bench/ab-ingest.ts <checkout A> <checkout B>`: ingest (POST /v1/tasks, 32 clients, no
// solver) of two checkouts' gateway processes, paired. Each side is a whole pipeline of its own
// (nats-server, database on one Postgres cluster, the gateway process started from that
// checkout's apps/gateway/src/main.ts); the sides take turns, alternating which goes first, and
// the figures are means over the rounds: submissions/s and CPU ms per submission by process
// group (gateway, nats-server, Postgres, this process's clients). bench/ab-gateway.ts is the
// quieter figure for the gateway's own CPU; this one says what a change does to the whole box.
//
//   AB_ROUNDS=8 bun bench/ab-ingest.ts /tmp/base .
//
// Settings: AB_ROUNDS (8), AB_TASKS per round (3000), AB_WARMUP per side (10000).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePort, startPostgres } from "@pipeline/devstack";
import { envCount } from "./support/context.ts";
import { cpuMeter, postgresPids } from "./support/cpu.ts";
import { closedLoop } from "./support/load.ts";
import { type Pipeline, startPipeline, submitTask } from "./support/pipeline.ts";
import { Scope } from "./support/scope.ts";

const roots = process.argv.slice(2).map((p) => resolve(p));
if (roots.length !== 2) throw new Error("usage: bun bench/ab-ingest.ts <checkout A> <checkout B>");
const rounds = envCount("AB_ROUNDS", 8);
const perRound = envCount("AB_TASKS", 3000);
const warmup = envCount("AB_WARMUP", 10_000);
const log = (m: string) => console.error(`[ab] ${m}`);

const dataDir = mkdtempSync(join(tmpdir(), "pipeline-ab-pg-"));
const pg = await startPostgres({ dataDir, port: await freePort(), fast: false, settings: [], log });
const scope = new Scope(log);
try {
  const sides: Pipeline[] = [];
  for (const root of roots)
    sides.push(
      await startPipeline(
        scope,
        { pgAdminUrl: pg.adminUrl, logDir: mkdtempSync(join(tmpdir(), "pipeline-ab-logs-")) },
        { solvers: 0, emulator: { latencyMs: 0, threads: 10 }, gatewayScript: join(root, "apps/gateway/src/main.ts") },
      ),
    );
  const run = `ab-${Date.now()}`;
  let offset = 0;
  for (const p of sides) {
    await closedLoop(warmup, 32, (i) => submitTask(p.gatewayUrl, i, run), offset);
    offset += warmup;
  }
  const figures = sides.map(() => ({ rate: 0, cpu: {} as Record<string, number> }));
  for (let r = 0; r < rounds; r++) {
    for (const k of [0, 1]) {
      const side = (k + r) % 2;
      const p = sides[side]!;
      const meter = cpuMeter({ gateway: p.pids.gateway, nats: p.pids.nats, postgres: () => postgresPids(dataDir) });
      meter.start();
      const res = await closedLoop(perRound, 32, (i) => submitTask(p.gatewayUrl, i, run), offset);
      offset += perRound;
      const seconds = meter.stop();
      if (res.errors) throw new Error(`${res.errors} submissions failed: ${res.firstError}`);
      const f = figures[side]!;
      f.rate += (perRound * 1000) / (res.endedAt - res.startedAt) / rounds;
      for (const [group, s] of Object.entries(seconds))
        f.cpu[group] = (f.cpu[group] ?? 0) + (s * 1000) / perRound / rounds;
    }
  }
  for (const side of [0, 1]) {
    const f = figures[side]!;
    const total = Object.values(f.cpu).reduce((a, b) => a + b, 0);
    const groups = Object.entries(f.cpu)
      .map(([g, ms]) => `${g} ${ms.toFixed(3)}`)
      .join(", ");
    console.log(
      `${"AB"[side]} ${roots[side]}: ${f.rate.toFixed(0)}/s, CPU ms per submission ${total.toFixed(3)} (${groups}) over ${rounds} rounds of ${perRound}`,
    );
  }
} finally {
  await scope.close();
  await pg.stop();
}
process.exit(0);
