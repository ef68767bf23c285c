// 5. Scaling: end-to-end throughput (the setup of end-to-end.ts) with 1, 2 and 4 solver
// processes, each as a ratio to the 1-process figure of this benchmark.
import { cpus } from "node:os";
import { concurrency, e2eTasks, type PipelineThroughput, pipelineThroughput } from "./end-to-end.ts";
import type { Benchmark } from "./support/context.ts";
import { cpuText } from "./support/cpu.ts";

const SOLVERS = [1, 2, 4];

export const scaling: Benchmark = {
  name: "scaling",
  title: `end-to-end throughput with ${SOLVERS.join(", ")} solver processes`,
  async run(ctx) {
    const tasks = e2eTasks();
    const runs: Record<number, PipelineThroughput> = {};
    // The end-to-end benchmark of this run measured one solver with this very setup: reused.
    const e2e = ctx.detail.endToEnd as { tasks: number; pipeline: PipelineThroughput } | undefined;
    const reused = e2e?.tasks === tasks;
    if (reused) runs[1] = e2e.pipeline;
    for (const n of SOLVERS) {
      if (runs[n]) continue;
      runs[n] = await pipelineThroughput(ctx, { tasks, solvers: n, run: `scaling-${n}` });
      ctx.log(`scaling: ${n} solver(s) ${runs[n]!.perSecond.toFixed(0)}/s`);
    }
    ctx.detail.scaling = { tasks, concurrencyPerSolver: concurrency(), oneSolverFromEndToEnd: reused, runs };
    const one = runs[1]!.perSecond;
    return SOLVERS.map((n) => ({
      bench: "scaling",
      figure: `${n} solver process${n > 1 ? "es" : ""}, tasks/s`,
      ours: runs[n]!.perSecond,
      unit: "/s",
      baseline: { label: "1 solver process", value: one },
      ratio: runs[n]!.perSecond / one,
      ...(n === 1
        ? {
            note: `scaling: ${tasks} tasks per run as in end-to-end${reused ? " (the 1-process run is end-to-end's own)" : ""}, SOLVER_CONCURRENCY=${concurrency()} per process, one gateway; all processes share this machine's ${cpus().length} CPUs with nats-server, Postgres and the client. CPU ms per task: ${SOLVERS.map((k) => `${k} process${k > 1 ? "es" : ""} ${cpuText(runs[k]!.cpuMsPerTask)}`).join("; ")}.`,
          }
        : {}),
    }));
  },
};
