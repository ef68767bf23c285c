// Token age at needBy (docs/scheduling.md): N reCAPTCHA v2 tasks whose clients need their token at
// known instants spread at half the plan's capacity. Scheduled (each task sent at once with its
// `needBy`: the pipeline starts it at needBy minus the type's measured p90 solve time plus the
// margin) against the same tasks and instants sent at once without (first come, first served), in
// the same run on the same pipeline. Age = needBy - the token's completion; missed = no token by
// needBy (failed, or completed after it) or a token already expired at needBy.
import { type BenchContext, type Benchmark, envCount } from "./support/context.ts";
import { closedLoop, openLoop, quantile } from "./support/load.ts";
import { API_KEY, type Pipeline, startPipeline, submitTask, taskBody } from "./support/pipeline.ts";
import type { Figure } from "./support/report.ts";

const LATENCY_MS = 1000;
const THREADS = 40;
/** The plan's capacity: THREADS provider tasks at once, each LATENCY_MS long. */
const CAPACITY_PER_S = THREADS / (LATENCY_MS / 1000);
/** The needBy instants come at half of it. */
const RATE_PER_S = CAPACITY_PER_S / 2;
/** The first needBy this long after the submissions start (time to send them all). */
const FIRST_NEED_MS = 20_000;
const WARMUP = 200;

/** One client's task: its id and the instant its token is needed. */
interface Need {
  id: string;
  needBy: number;
}

/** What one arm's tasks did, read from the tasks table. */
interface ArmResult {
  n: number;
  ages: number[];
  missed: number;
  late: number;
  failed: number;
  expiredAtNeed: number;
}

async function submitNeeded(p: Pipeline, run: string, needs: number[], scheduled: boolean): Promise<Need[]> {
  const out: Need[] = new Array(needs.length);
  const sent = await closedLoop(needs.length, envCount("BENCH_CLIENTS", 32), async (i) => {
    const body = JSON.parse(taskBody(i, run, "recaptcha_v2")) as Record<string, unknown>;
    if (scheduled) body.needBy = new Date(needs[i]!).toISOString();
    const res = await fetch(`${p.gatewayUrl}/v1/tasks`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${API_KEY}`,
        "content-type": "application/json",
        "idempotency-key": `${run}-${i}`,
      },
      body: JSON.stringify(body),
    });
    const r = (await res.json()) as { id?: string };
    if (res.status !== 202 || !r.id) throw new Error(`POST /v1/tasks answered ${res.status}: ${JSON.stringify(r)}`);
    out[i] = { id: r.id, needBy: needs[i]! };
  });
  if (sent.errors) throw new Error(`${sent.errors} of ${needs.length} submissions failed: ${sent.firstError}`);
  return out;
}

/** Waits until every task of the arm is final (or `timeoutMs`), then reads each one's outcome against its needBy. */
async function readArm(p: Pipeline, needs: Need[], timeoutMs: number): Promise<ArmResult> {
  const ids = needs.map((n) => n.id);
  const until = Date.now() + timeoutMs;
  for (;;) {
    const [r] = await p.db.sql<{ open: number }[]>`
      select count(*)::int as open from tasks where id = any(${ids}::uuid[]) and state not in ('completed', 'failed', 'cancelled')`;
    if (r!.open === 0) break;
    if (Date.now() > until) throw new Error(`${r!.open} of ${ids.length} tasks still open after ${timeoutMs} ms`);
    await Bun.sleep(500);
  }
  const rows = await p.db.sql<{ id: string; state: string; done: number | null; expires: number | null }[]>`
    select id, state, (extract(epoch from completed_at) * 1000)::float8 as done,
      (extract(epoch from token_expires_at) * 1000)::float8 as expires
    from tasks where id = any(${ids}::uuid[])`;
  const byId = new Map(rows.map((r) => [r.id, r]));
  const res: ArmResult = { n: needs.length, ages: [], missed: 0, late: 0, failed: 0, expiredAtNeed: 0 };
  for (const need of needs) {
    const r = byId.get(need.id);
    if (!r || r.state !== "completed" || r.done === null) {
      res.failed++;
      res.missed++;
      continue;
    }
    if (r.done > need.needBy) res.late++;
    else if (r.expires !== null && r.expires < need.needBy) res.expiredAtNeed++;
    else {
      res.ages.push((need.needBy - r.done) / 1000);
      continue;
    }
    res.missed++;
  }
  return res;
}

/** A short run below capacity, so the gateway has a measured p90 solve time for the type (it reads it every 30 s at most, on demand). */
async function warmUp(p: Pipeline, ctx: BenchContext): Promise<void> {
  await openLoop(WARMUP, RATE_PER_S, (i) => submitTask(p.gatewayUrl, i, "needby-warm", "recaptcha_v2"));
  const [r] = await p.db.sql<{ n: number }[]>`select count(*)::int as n from tasks where state = 'completed'`;
  ctx.log(`need-by: warm-up ${WARMUP} tasks, ${r!.n} completed; letting the gateway read the solve times`);
  // A scheduled submission makes the gateway read the figures (in the background): one probe.
  const probe = JSON.parse(taskBody(0, "needby-probe", "recaptcha_v2")) as Record<string, unknown>;
  probe.notBefore = new Date(Date.now() + 2000).toISOString();
  await fetch(`${p.gatewayUrl}/v1/tasks`, {
    method: "POST",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify(probe),
  });
  await Bun.sleep(3000);
}

const fmtArm = (r: ArmResult) =>
  `${r.n} tasks: ${r.ages.length} on time, ${r.late} late, ${r.failed} failed, ${r.expiredAtNeed} expired at needBy; age p50 ${quantile(r.ages, 0.5).toFixed(1)} s, p90 ${quantile(r.ages, 0.9).toFixed(1)} s, max ${quantile(r.ages, 1).toFixed(1)} s`;

function figures(n: number, s: ArmResult, f: ArmResult): Figure[] {
  const setting = `need-by: ${n} reCAPTCHA v2 tasks, needBy instants ${RATE_PER_S}/s apart from ${FIRST_NEED_MS / 1000} s after the first submission (half the plan's capacity: ${THREADS} threads x ${LATENCY_MS / 1000} s provider latency = ${CAPACITY_PER_S}/s), all submitted at once. Scheduled: ${fmtArm(s)}. At once (first come, first served): ${fmtArm(f)}.`;
  const sp90 = quantile(s.ages, 0.9);
  return [
    {
      bench: "need-by",
      figure: "token age at needBy, p50",
      ours: quantile(s.ages, 0.5),
      unit: "s",
      baseline: { label: "submitted at once", value: quantile(f.ages, 0.5) },
      ratio: quantile(s.ages, 0.5) / quantile(f.ages, 0.5),
      note: setting,
    },
    {
      bench: "need-by",
      figure: "token age at needBy, p90",
      ours: sp90,
      unit: "s",
      baseline: { label: "submitted at once", value: quantile(f.ages, 0.9) },
      ratio: sp90 / quantile(f.ages, 0.9),
      target: "< 30 s",
      met: sp90 < 30,
      note: "need-by: as above; the scheduled start is needBy - (p90 solve time measured by the gateway + SCHEDULE_MARGIN_MS 5 s).",
    },
    {
      bench: "need-by",
      figure: "missed needBy (no valid token at needBy)",
      ours: s.missed,
      unit: "",
      baseline: { label: "submitted at once", value: f.missed },
      target: "= 0",
      met: s.missed === 0,
      note: "need-by: failed, completed after needBy, or a token already expired at needBy.",
    },
  ];
}

export const needBy: Benchmark = {
  name: "need-by",
  title: "token age at needBy: scheduled (needBy) against submitted at once, at half the plan's capacity",
  async run(ctx) {
    const n = envCount("BENCH_NEEDBY_TASKS", 1000);
    const p = await startPipeline(ctx.scope, ctx, {
      solvers: 1,
      emulator: { latencyMs: LATENCY_MS, threads: THREADS },
      solverEnv: { FIRST_POLL_MS: "1000", POLL_INTERVAL_MS: "250", HIGH_LANE_RESERVED: "0" },
    });
    await warmUp(p, ctx);
    const plan = (t0: number) => Array.from({ length: n }, (_, i) => t0 + FIRST_NEED_MS + (i * 1000) / RATE_PER_S);
    const lastNeed = FIRST_NEED_MS + (n * 1000) / RATE_PER_S;
    ctx.log(`need-by: scheduled arm, ${n} tasks, needBy over ${(lastNeed / 1000).toFixed(0)} s`);
    const scheduled = await readArm(p, await submitNeeded(p, "needby-s", plan(Date.now()), true), lastNeed + 60_000);
    ctx.log(`need-by: scheduled: ${fmtArm(scheduled)}`);
    const fcfs = await readArm(p, await submitNeeded(p, "needby-f", plan(Date.now()), false), lastNeed + 60_000);
    ctx.log(`need-by: at once: ${fmtArm(fcfs)}`);
    ctx.detail.needBy = {
      tasks: n,
      ratePerS: RATE_PER_S,
      capacityPerS: CAPACITY_PER_S,
      scheduled: fmtArm(scheduled),
      atOnce: fmtArm(fcfs),
    };
    return figures(n, scheduled, fcfs);
  },
};
