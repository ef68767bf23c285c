// The soak itself: a stack at a steady load for a long time, disturbed on a schedule (a solver
// kill -9 every `killEveryMs`, started again at once; one gateway restart at the middle), every
// process sampled every `sampleEveryMs`; then the offering stops, the open tasks finish, and the
// result is every process's growth, the globals' growth, the tasks lost and the extra paid.
import { submitWindowsAtKill } from "@pipeline/devstack/stack";
import {
  type Disturbance,
  type GlobalGrowth,
  globalGrowth,
  type Outcome,
  type ProcessGrowth,
  processGrowth,
} from "./growth.ts";
import { type Load, startLoad } from "./load.ts";
import { clockOf as clock, printSample } from "./report.ts";
import { type Sample, takeSample } from "./sample.ts";
import type { SoakSettings } from "./settings.ts";
import { SOAK_API_KEY, type SoakStack, startSoakStack } from "./stack.ts";

export interface SoakResult {
  settings: SoakSettings;
  samples: Sample[];
  procs: ProcessGrowth[];
  global: GlobalGrowth | undefined;
  outcome: Outcome;
  /** What was done to the stack, when (ms since the soak began). */
  events: Array<Disturbance & { what: string }>;
  /** Where the apps' logs are (run.ts removes them when every goal is met). */
  logDir: string;
}

const FINAL = ["completed", "failed", "cancelled"];

export async function runSoak(s: SoakSettings, log: (m: string) => void): Promise<SoakResult> {
  let t0 = performance.now();
  const now = () => Math.round(performance.now() - t0);
  const stack = await startSoakStack({ solvers: s.solvers, now });
  // Ctrl-C or a CI timeout: the apps, nats-server and the database go with the soak.
  const interrupted = (sig: NodeJS.Signals) => {
    log(`${sig}: stopping the stack`);
    void stack.stop().finally(() => process.exit(130));
  };
  process.once("SIGINT", interrupted).once("SIGTERM", interrupted);
  try {
    log(`stack up in ${(now() / 1000).toFixed(1)} s`);
    t0 = performance.now();
    for (const w of stack.watched) w.startedAt = 0;
    const load = startLoad({
      gatewayUrl: stack.region.gatewayUrl,
      apiKey: SOAK_API_KEY,
      rate: s.rate,
      run: `r${Date.now().toString(36)}`,
    });
    const events: SoakResult["events"] = [];
    const samples: Sample[] = [];
    const chaos = disturb(stack, s, now, (at, what) => {
      events.push({ at, until: now(), what });
      log(`${clock(at)} ${what} (done at ${clock(now())})`);
    });
    await sampleUntilEnd(stack, s, now, load, samples);
    await chaos;
    await load.stop();
    log(`${clock(now())} offering stopped: ${load.offered()} offered, ${load.accepted().length} accepted; draining`);
    const outcome = await finish(stack, load, s.drainMs, log);
    log(`${clock(now())} drained; stopping the stack`);
    const disturbances = events.map((e) => ({ at: e.at, until: e.until }));
    return {
      settings: s,
      samples,
      procs: stack.watched.map((w) => processGrowth(w, samples, { warmupMs: s.warmupMs, soakStart: 0, disturbances })),
      global: globalGrowth(samples, s.warmupMs, disturbances),
      logDir: stack.system.logDir,
      outcome,
      events,
    };
  } finally {
    process.off("SIGINT", interrupted).off("SIGTERM", interrupted);
    await stack.stop();
  }
}

/** A sample at 0 and every `sampleEveryMs`, the last one at the end of the offering. */
async function sampleUntilEnd(stack: SoakStack, s: SoakSettings, now: () => number, load: Load, samples: Sample[]) {
  const g = {
    jsm: stack.jsm,
    db: stack.region.db,
    database: stack.region.database.name,
    ports: { provider: Number(new URL(stack.system.provider.url).port), gateway: stack.region.gatewayPort },
  };
  for (let k = 0; ; k++) {
    const at = Math.min(k * s.sampleEveryMs, s.durationMs);
    await Bun.sleep(Math.max(0, at - now()));
    const sample = await takeSample(now(), stack.watched, g);
    samples.push(sample);
    const [done] = await stack.region.db.sql<
      { n: number }[]
    >`select count(*)::int as n from tasks where state = 'completed'`;
    sample.tasks = { offered: load.offered(), accepted: load.accepted().length, completed: done!.n };
    printSample(sample);
    if (at >= s.durationMs) return;
  }
}

/** The kills every `killEveryMs` and the gateway restart at the middle, in time order. */
async function disturb(stack: SoakStack, s: SoakSettings, now: () => number, note: (at: number, what: string) => void) {
  const plan: Array<{ at: number; run: () => Promise<string> }> = [];
  for (let at = s.killEveryMs; at < s.durationMs; at += s.killEveryMs)
    plan.push({ at, run: async () => `kill -9 ${await stack.killSolver()}; a new solver started` });
  plan.push({
    at: s.durationMs / 2,
    run: async () => (await stack.restartGateway(), "gateway restarted (SIGTERM, then a new one)"),
  });
  plan.sort((a, b) => a.at - b.at);
  for (const step of plan) {
    await Bun.sleep(Math.max(0, step.at - now()));
    const at = now();
    note(at, await step.run());
  }
}

/** Waits for the open tasks (up to `drainMs`), then counts what was lost and paid twice. */
async function finish(stack: SoakStack, load: Load, drainMs: number, log: (m: string) => void): Promise<Outcome> {
  const sql = stack.region.db.sql;
  const until = Date.now() + drainMs;
  for (;;) {
    const [open] = await sql<{ n: number }[]>`select count(*)::int as n from tasks where state <> all(${FINAL})`;
    if (open!.n === 0 || Date.now() > until) {
      if (open!.n) log(`${open!.n} tasks still open after the drain`);
      break;
    }
    await Bun.sleep(1000);
  }
  const completed = new Set(
    (await sql<{ id: string }[]>`select id from tasks where state = 'completed'`).map((r) => r.id),
  );
  const [all] = await sql<{ n: number }[]>`select count(*)::int as n from tasks`;
  const windows = submitWindowsAtKill({ solvers: stack.region.solvers }, stack.killed);
  for (const g of load.givenUp().slice(0, 5)) log(`given up: ${g}`);
  return {
    offered: load.offered(),
    accepted: load.accepted().length,
    unaccepted: load.givenUp().length,
    lost: load.accepted().filter((id) => !completed.has(id)).length,
    tasks: all!.n,
    providerSubmissions: stack.system.emu!.stats().submissions,
    explainedExtra: windows.inWindow + windows.unanswered,
    clientErrors: load.client.stats().errors,
  };
}
