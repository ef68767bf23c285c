import { randomUUID } from "node:crypto";
import { progressBar } from "@pipeline/shared/progress";
import { recordAudit } from "../runtime/audit.ts";
import { faultFor, type FaultDeps } from "./faults/index.ts";
import { startDrillLoad } from "./load.ts";
import { ratePerSec, recoveryMs, rpoOf, type RpoFigures } from "./measure.ts";
import { CATCH_UP_TARGET_MS, RTO_TARGET_MS, type Scenario } from "./scenarios.ts";

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
}

/**
 * Runs one scenario against a running stack: a steady load through the gateway, the baseline
 * rate, the fault and its remedy (the runbook's commands), the load until the rate is back
 * for `stableMs`, then every acknowledged task followed to its end. RPO counts acknowledged
 * tasks that did not complete; RTO is measured from the fault (see measure.ts).
 */
export async function runDrill(o: DrillOptions): Promise<DrillReport> {
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
  // On a terminal (quiet when piped): the baseline's seconds, then the completions while waiting for the normal rate.
  const baselineBar = progressBar(`drill ${o.scenario}: baseline`, Math.round(o.baselineMs / 1000), { unit: "s" });
  const baselineTick = setInterval(() => baselineBar.update(Math.min(Math.round((Date.now() - loadStart) / 1000), Math.round(o.baselineMs / 1000))), 250);
  await Bun.sleep(o.baselineMs);
  clearInterval(baselineTick);
  baselineBar.update(Math.round(o.baselineMs / 1000));
  baselineBar.done();
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
  const stableMs = o.stableMs ?? 4000;
  const giveUp = faultAt + o.timeoutMs;
  const recoveryBar = progressBar(`drill ${o.scenario}: waiting for the normal rate, tasks completed`, undefined, { unit: "tasks" });
  for (;;) {
    const now = Date.now();
    recoveryBar.update(load.completions().length);
    const r = recoveryMs(load.completions(), { faultAt, endAt: now, baselinePerSec });
    if (r !== null && now - faultAt - r >= stableMs && now - faultAt >= remedyMs + stableMs) break;
    if (now > giveUp) {
      step("gave up waiting for the normal rate");
      break;
    }
    await Bun.sleep(250);
  }
  recoveryBar.done();
  const loadEnd = Date.now();
  await load.finish(Math.max(30_000, o.timeoutMs / 2));
  const all = [...load.tasks.values()];
  const figures: RpoFigures = {
    acknowledged: all.length,
    completed: all.filter((t) => t.status === "completed").length,
    lost: all.filter((t) => t.status === "missing").length,
    failed: all.filter((t) => ["failed", "cancelled", "expired"].includes(t.status) && !tokenLost(t)).length,
    tokensLost: all.filter(tokenLost).length,
    unfinished: all.filter((t) => !["completed", "failed", "cancelled", "expired", "missing"].includes(t.status)).length,
    refused: load.refused(),
  };
  const rtoMs = recoveryMs(load.completions(), { faultAt, endAt: loadEnd, baselinePerSec });
  const before = acknowledgedBeforeFault.map((id) => load.tasks.get(id)!);
  const catchUpMs = before.every((t) => t.finishedAt !== undefined) ? Math.max(0, ...before.map((t) => t.finishedAt! - faultAt)) : null;
  const rpo = rpoOf(figures);
  const report: DrillReport = {
    scenario: o.scenario,
    runId,
    rate: o.rate,
    faultAt,
    baselinePerSec: Math.round(baselinePerSec * 10) / 10,
    rpo,
    figures,
    rtoMs,
    rtoTargetMs: RTO_TARGET_MS[o.scenario],
    remedyMs,
    catchUpMs,
    catchUpTargetMs: CATCH_UP_TARGET_MS[o.scenario],
    steps,
    detail,
    passed: rpo === 0 && rtoMs !== null && rtoMs <= RTO_TARGET_MS[o.scenario] && catchUpMs !== null && catchUpMs <= CATCH_UP_TARGET_MS[o.scenario],
  };
  await recordAudit(o.ctx.database.db, { actor: o.actor, action: "drill", detail: { scenario: o.scenario, runId, rpo, rtoMs, passed: report.passed } }).catch(() => {});
  return report;
}

export function renderDrillReport(r: DrillReport): string {
  const f = r.figures;
  const sec = (ms: number | null) => (ms === null ? "never" : `${(ms / 1000).toFixed(1)} s`);
  return [
    `drill ${r.scenario} (${r.runId}): ${r.passed ? "PASSED" : "FAILED"}`,
    `  RPO ${r.rpo} acknowledged task(s) lost or failed  (acknowledged ${f.acknowledged}: completed ${f.completed}, lost ${f.lost}, failed ${f.failed}, unfinished ${f.unfinished}; refused while down ${f.refused})`,
    ...(f.tokensLost ? [`  ${f.tokensLost} task(s) completed after the snapshot came back completed without their token (events carry none: retention; their clients solve again)`] : []),
    `  RTO ${sec(r.rtoMs)} (target ${sec(r.rtoTargetMs)}): completions back at >= 50% of the normal ${r.baselinePerSec}/s`,
    `  remedy applied after ${sec(r.remedyMs)}; every task acknowledged before the fault done after ${sec(r.catchUpMs)} (target ${sec(r.catchUpTargetMs)})`,
    "  steps:",
    ...r.steps.map((s) => `    ${(s.atMs / 1000).toFixed(1).padStart(6)} s  ${s.what}`),
  ].join("\n");
}
