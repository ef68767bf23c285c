// The commands about the running fleet: workers, config, rotate-key, audit, drill.
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import type { Logger } from "@pipeline/shared/log";
import { configHistory, liveWorkers, openConfigBucket, openWorkersBucket, type Heartbeat } from "@pipeline/shared/runtime";
import type { Command } from "./cli-args.ts";
import type { RecoveryConfig } from "./config.ts";
import { openContext, UsageError } from "./context.ts";
import { renderDrillReport, runDrill } from "./drill/run-drill.ts";
import { recentAudit } from "./runtime/audit.ts";
import { rollbackConfig, rotateKey, setConfig } from "./runtime/config-ops.ts";

type RuntimeCommand = Extract<Command, { command: "workers" | "config" | "rotate-key" | "audit" | "drill" }>;

/** Prints the value as JSON (`--json`) or the text for people. */
export const print = (json: boolean | undefined, value: unknown, text: string) => console.log(json ? JSON.stringify(value, null, 2) : text);

/** Who is acting: --by, else the login (audited with the host). */
const actorOf = (by: string | undefined) => `${by ?? process.env.SUDO_USER ?? process.env.USER ?? "unknown"}@${hostname()}`;

export function renderWorkers(ws: Heartbeat[]): string {
  if (ws.length === 0) return "no live solver (no heartbeat in the last 10 s)";
  return ws
    .map((w) => `${w.workerId.padEnd(24)} pid ${String(w.pid).padEnd(7)} ${w.host}  ${w.version}  key ${w.keyName} (${w.keyRef})  config rev ${w.configRevision ?? "env"}${w.configRejected ? ` REFUSES rev ${w.configRejected.revision}: ${w.configRejected.error}` : ""}  breaker ${w.breaker}  ${w.inFlight} in flight`)
    .join("\n");
}

export async function runRuntimeCommand(cmd: RuntimeCommand, config: RecoveryConfig, log: Logger): Promise<number> {
  const ctx = await openContext(config, log, "recovery-cli");
  try {
    const configKv = await openConfigBucket(ctx.nc, config.REGION);
    const workersKv = await openWorkersBucket(ctx.nc, config.REGION);
    const deps = { config: configKv, workers: workersKv, db: ctx.database.db, actor: actorOf("by" in cmd ? cmd.by : undefined) };
    switch (cmd.command) {
      case "workers": {
        const w = await liveWorkers(workersKv);
        print(cmd.json, w, renderWorkers(w.workers) + (w.unreadable.length ? `\nunreadable heartbeats: ${w.unreadable.join(", ")}` : ""));
        return 0;
      }
      case "audit": {
        const rows = await recentAudit(ctx.database.db, cmd.limit ?? 50);
        print(cmd.json, rows, rows.map((r) => `${r.at.toISOString()}  ${r.actor.padEnd(24)} ${r.action.padEnd(16)} ${JSON.stringify(r.detail)}`).join("\n") || "no audit entries");
        return 0;
      }
      case "rotate-key": {
        const r = await rotateKey(deps, cmd.to, { ...(cmd.reason ? { reason: cmd.reason } : {}), waitMs: cmd.wait ?? 30_000 });
        const ok = r.refused.length === 0 && r.pending.length === 0 && r.workers.length > 0;
        print(
          cmd.json,
          r,
          `rotate-key ${r.from ?? "?"} -> ${cmd.to}: revision ${r.revision}; applied by ${r.applied.length}/${r.workers.length} solver(s) in ${r.ms} ms` +
            (r.refused.length ? `\nREFUSED by ${r.refused.map((x) => `${x.workerId} (${x.error})`).join(", ")}: the old key is still in use there; fix the key file, then rotate again` : "") +
            (r.pending.length ? `\nno answer yet from ${r.pending.join(", ")}` : "") +
            (r.workers.length === 0 ? "\nno live solver: the new key is used when they start" : ""),
        );
        return ok ? 0 : 1;
      }
      case "config": {
        const [sub, arg] = cmd.args;
        if (sub === "show" || sub === "history") {
          const all = await configHistory(configKv);
          const { workers } = await liveWorkers(workersKv);
          const shown = sub === "show" ? all.slice(-1) : all;
          const lines = shown.map((r) => `rev ${String(r.revision).padEnd(5)} ${r.at.toISOString()}  ${r.parsed.ok ? `${r.parsed.value.changedBy}: ${JSON.stringify((({ changedBy: _b, changedAt: _a, ...f }) => f)(r.parsed.value))}` : `INVALID (${r.parsed.error})`}`);
          const inUse = [...new Set(workers.map((w) => String(w.configRevision ?? "env")))];
          print(cmd.json, { revisions: shown, inUse }, `${lines.join("\n") || "no config stored: solvers use their environment"}\nin use by the live solvers: ${inUse.join(", ") || "(none alive)"}`);
          return 0;
        }
        if (sub === "set") {
          const text = arg === "-" ? await Bun.stdin.text() : readFileSync(String(arg), "utf8");
          let doc: unknown;
          try {
            doc = JSON.parse(text);
          } catch {
            throw new UsageError(`${arg}: not JSON`);
          }
          const r = await setConfig(deps, doc, cmd.reason);
          print(cmd.json, r, `stored revision ${r.revision}; \`recovery workers\` shows who applied it`);
          return 0;
        }
        const r = await rollbackConfig(deps, typeof arg === "number" ? arg : undefined, cmd.reason);
        print(cmd.json, r, `revision ${r.restored} restored as revision ${r.revision}`);
        return 0;
      }
      case "drill": {
        if (!config.DATABASE_URL) throw new UsageError("DATABASE_URL is required for drills");
        if (!config.DRILL_API_KEY) throw new UsageError("DRILL_API_KEY is required for drills (a client key of the gateway)");
        const report = await runDrill({
          scenario: cmd.args[0],
          ctx,
          configKv,
          workersKv,
          actor: deps.actor,
          databaseUrl: config.DATABASE_URL,
          snapshotDir: config.SNAPSHOT_DIR,
          snapshotKeep: config.SNAPSHOT_KEEP,
          gatewayGraceMs: config.GATEWAY_PUBLISH_GRACE_MS,
          ...(cmd.to ? { keyTo: cmd.to } : {}),
          gatewayUrl: config.GATEWAY_URL,
          apiKey: config.DRILL_API_KEY,
          rate: cmd.rate ?? config.DRILL_RATE,
          baselineMs: cmd.baseline ?? 5000,
          timeoutMs: cmd.timeout ?? 180_000,
          ...(cmd.json ? {} : { say: (l: string) => console.log(l) }),
        });
        print(cmd.json, report, renderDrillReport(report));
        return report.passed ? 0 : 1;
      }
    }
  } finally {
    await ctx.close();
  }
}

