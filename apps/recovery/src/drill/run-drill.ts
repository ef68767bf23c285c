import { randomUUID } from "node:crypto";
import { progressBar } from "@pipeline/shared/progress";
import { FINAL_STATUSES } from "@pipeline/shared/schemas";
import { recordAudit } from "../fleet/audit.ts";
import { recordDrill } from "../incidents/record.ts";
import { type DrillMoney, drillMoney, moneyLine } from "../money/drill-money.ts";
import { DrillError, type FaultDeps, faultFor } from "./faults/index.ts";
import { type DrillLoad, startDrillLoad, type Tracked } from "./load.ts";
import { type RpoFigures, ratePerSec, recoveryMs, rpoOf } from "./measure.ts";
import { CATCH_UP_TARGET_MS, RTO_TARGET_MS, type Scenario, unconfirmedDrill } from "./scenarios.ts";

/** A completed task whose token is not held any more (restored from EVENTS, which carry none). */
const tokenLost = (t: { status: string; code?: string }) => t.status === "expired" && t.code === "TOKEN_UNAVAILABLE";

export interface DrillOptions extends Omit<FaultDeps, "step"> {
  scenario: Scenario;
  gatewayUrl: string;
  apiKey: string;
  /** Submissions per second of the steady load. */
  rate: number;
  /** Load before the fault, to measure the normal rate. */
  baselineMs: number;
  /** Longest wait for recovery, and then for every acknowledged task to finish. */
  timeoutMs: number;
  /** Consecutive seconds at the normal rate that end the load once the fault is remedied. */
  stableMs?: number;
  /** Tests: runs right after the fault is injected and remedied (a provider revoking a key...). */
  afterInject?: () => Promise<void> | void;
  /** Progress lines, as they happen. */
  say?: (line: string) => void;
  /** The operator confirmed a scenario that destroys live state (`--yes`); refused without it. */
  confirmed?: boolean;
}

export interface DrillReport {
  scenario: Scenario;
  runId: string;
  rate: number;
  /** When the fault was injected (epoch ms). */
  faultAt: number;
  baselinePerSec: number;
  rpo: number;
  figures: RpoFigures;
  /** Fault -> completions back at the normal rate; null when they never came back. */
  rtoMs: number | null;
  rtoTargetMs: number;
  /** Fault -> the remedy applied (the runbook's command done). */
  remedyMs: number;
  /** Fault -> the last task acknowledged before the fault finished. */
  catchUpMs: number | null;
  catchUpTargetMs: number;
  steps: { atMs: number; what: string }[];
  detail: Record<string, unknown>;
  passed: boolean;
  /** What the drill's tasks cost (the ledger), and the extra beyond one charge per task. */
  money?: DrillMoney;
  /** The incident the drill recorded (`recovery incident <id> --markdown`). */
  incidentId?: number;
}

/** The baseline: `ms` of load, with a progress bar on a terminal (quiet when piped). */
async function baseline(scenario: Scenario, ms: number, loadStart: number): Promise<void> {
  const bar = progressBar(`drill ${scenario}: baseline`, Math.round(ms / 1000), { unit: "s" });
  const tick = setInterval(
    () => bar.update(Math.min(Math.round((Date.now() - loadStart) / 1000), Math.round(ms / 1000))),
    250,
  );
  await Bun.sleep(ms);
  clearInterval(tick);
  bar.update(Math.round(ms / 1000));
  bar.done();
}

/**
 * Waits until completions are back at the normal rate for `stableMs` (and at least `stableMs`
 * after the remedy), or gives up at `giveUp`; shows the completions on a terminal.
 */
async function awaitNormalRate(o: {
  scenario: Scenario;
  load: DrillLoad;
  faultAt: number;
  remedyMs: number;
  baselinePerSec: number;
  stableMs: number;
  giveUp: number;
  step: (what: string) => void;
}): Promise<void> {
  const bar = progressBar(`drill ${o.scenario}: waiting for the normal rate, tasks completed`, undefined, {
    unit: "tasks",
  });
  for (;;) {
    const now = Date.now();
    bar.update(o.load.completions().length);
    const r = recoveryMs(o.load.completions(), { faultAt: o.faultAt, endAt: now, baselinePerSec: o.baselinePerSec });
    if (r !== null && now - o.faultAt - r >= o.stableMs && now - o.faultAt >= o.remedyMs + o.stableMs) break;
    if (now > o.giveUp) {
      o.step("gave up waiting for the normal rate");
      break;
    }
    await Bun.sleep(250);
  }
  bar.done();
}

/** What became of every acknowledged task (RPO counts the lost and the failed). */
function rpoFigures(all: Tracked[], refused: number): RpoFigures {
  return {
    acknowledged: all.length,
    completed: all.filter((t) => t.status === "completed").length,
    lost: all.filter((t) => t.status === "missing").length,
    failed: all.filter((t) => ["failed", "cancelled", "expired"].includes(t.status) && !tokenLost(t)).length,
    tokensLost: all.filter(tokenLost).length,
    unfinished: all.filter((t) => t.status !== "missing" && !(FINAL_STATUSES as readonly string[]).includes(t.status))
      .length,
    refused,
  };
}

/** The report of a run: RPO, RTO and catch-up against the scenario's targets. */
function drillReport(
  o: DrillOptions,
  run: Pick<DrillReport, "runId" | "faultAt" | "figures" | "rtoMs" | "remedyMs" | "catchUpMs" | "steps" | "detail"> & {
    baselinePerSec: number;
  },
): DrillReport {
  const rpo = rpoOf(run.figures);
  return {
    scenario: o.scenario,
    runId: run.runId,
    rate: o.rate,
    faultAt: run.faultAt,
    baselinePerSec: Math.round(run.baselinePerSec * 10) / 10,
    rpo,
    figures: run.figures,
    rtoMs: run.rtoMs,
    rtoTargetMs: RTO_TARGET_MS[o.scenario],
    remedyMs: run.remedyMs,
    catchUpMs: run.catchUpMs,
    catchUpTargetMs: CATCH_UP_TARGET_MS[o.scenario],
    steps: run.steps,
    detail: run.detail,
    passed:
      rpo === 0 &&
      run.rtoMs !== null &&
      run.rtoMs <= RTO_TARGET_MS[o.scenario] &&
      run.catchUpMs !== null &&
      run.catchUpMs <= CATCH_UP_TARGET_MS[o.scenario],
  };
}

/**
 * Runs one scenario against a running stack: a steady load through the gateway, the baseline
 * rate, the fault and its remedy (the runbook's commands), the load until the rate is back
 * for `stableMs`, then every acknowledged task followed to its end. RPO counts acknowledged
 * tasks that did not complete; RTO is measured from the fault (see measure.ts).
 */
export async function runDrill(o: DrillOptions): Promise<DrillReport> {
  const refused = unconfirmedDrill(o.scenario, o.confirmed);
  if (refused) throw new DrillError(refused);
  const say = o.say ?? (() => {});
  const runId = `${o.scenario}-${randomUUID().slice(0, 8)}`;
  let faultAt = 0;
  const steps: DrillReport["steps"] = [];
  const step = (what: string) => {
    const atMs = faultAt ? Date.now() - faultAt : 0;
    steps.push({ atMs, what });
    say(`  [${(atMs / 1000).toFixed(1).padStart(5)} s] ${what}`);
  };
  const fault = faultFor(o.scenario, { ...o, step });
  await fault.prepare();
  const load = startDrillLoad({ gatewayUrl: o.gatewayUrl, apiKey: o.apiKey, rate: o.rate, runId });
  const loadStart = Date.now();
  say(`drill ${o.scenario}: steady load of ${o.rate}/s, baseline ${o.baselineMs} ms`);
  await baseline(o.scenario, o.baselineMs, loadStart);
  faultAt = Date.now();
  const warm = Math.min(2000, o.baselineMs / 2);
  const baselinePerSec = ratePerSec(load.completions(), loadStart + warm, faultAt);
  if (baselinePerSec <= 0) {
    await load.finish(5000);
    throw new Error(`no task completed during the ${o.baselineMs} ms baseline: is a solver running?`);
  }
  const acknowledgedBeforeFault = [...load.tasks.values()].map((t) => t.id);
  const detail = await fault.inject();
  const remedyMs = Date.now() - faultAt;
  step("remedy applied");
  await o.afterInject?.();
  await awaitNormalRate({
    scenario: o.scenario,
    load,
    faultAt,
    remedyMs,
    baselinePerSec,
    stableMs: o.stableMs ?? 4000,
    giveUp: faultAt + o.timeoutMs,
    step,
  });
  const loadEnd = Date.now();
  await load.finish(Math.max(30_000, o.timeoutMs / 2));
  const figures = rpoFigures([...load.tasks.values()], load.refused());
  const rtoMs = recoveryMs(load.completions(), { faultAt, endAt: loadEnd, baselinePerSec });
  const before = acknowledgedBeforeFault.map((id) => load.tasks.get(id)!);
  const catchUpMs = before.every((t) => t.finishedAt !== undefined)
    ? Math.max(0, ...before.map((t) => t.finishedAt! - faultAt))
    : null;
  const report = drillReport(o, { runId, faultAt, baselinePerSec, figures, rtoMs, remedyMs, catchUpMs, steps, detail });
  const money = await drillMoney(
    o.ctx.database.sql,
    [...load.tasks.values()].map((t) => t.id),
  ).catch(() => undefined);
  if (money) report.money = money;
  await recordAudit(o.ctx.database.db, {
    actor: o.actor,
    action: "drill",
    detail: {
      scenario: o.scenario,
      runId,
      rpo: report.rpo,
      rtoMs,
      passed: report.passed,
      ...(money ? { extraMicros: money.extraMicros, totalMicros: money.totalMicros } : {}),
    },
  }).catch(() => {});
  // The drill as an incident, with what it measured (docs/incidents.md).
  const incident = await recordDrill(o.ctx.database.sql, {
    ...report,
    region: o.ctx.region,
    acknowledged: figures.acknowledged,
    ...(money ? { money } : {}),
  }).catch((err: Error) => o.ctx.log.warn({ err: err.message }, "drill incident not recorded"));
  if (incident) report.incidentId = incident.incident.id;
  return report;
}

export function renderDrillReport(r: DrillReport): string {
  const f = r.figures;
  const sec = (ms: number | null) => (ms === null ? "never" : `${(ms / 1000).toFixed(1)} s`);
  return [
    `drill ${r.scenario} (${r.runId}): ${r.passed ? "PASSED" : "FAILED"}`,
    `  RPO ${r.rpo} acknowledged task(s) lost or failed  (acknowledged ${f.acknowledged}: completed ${f.completed}, lost ${f.lost}, failed ${f.failed}, unfinished ${f.unfinished}; refused while down ${f.refused})`,
    ...(f.tokensLost
      ? [
          `  ${f.tokensLost} task(s) completed after the snapshot came back completed without their token (events carry none: retention; their clients solve again)`,
        ]
      : []),
    `  RTO ${sec(r.rtoMs)} (target ${sec(r.rtoTargetMs)}): completions back at >= 50% of the normal ${r.baselinePerSec}/s`,
    ...(r.money ? [`  ${moneyLine(r.money)}`] : []),
    ...(r.incidentId ? [`  incident ${r.incidentId}: bun run recovery incident ${r.incidentId} --markdown`] : []),
    `  remedy applied after ${sec(r.remedyMs)}; every task acknowledged before the fault done after ${sec(r.catchUpMs)} (target ${sec(r.catchUpTargetMs)})`,
    "  steps:",
    ...r.steps.map((s) => `    ${(s.atMs / 1000).toFixed(1).padStart(6)} s  ${s.what}`),
  ].join("\n");
}
