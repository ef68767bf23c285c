// `recovery drill <scenario>`: a fault under steady load; RPO and RTO measured; exit 1 if it failed.
import { UsageError } from "../../context.ts";
import { renderDrillReport, runDrill } from "../../drill/run-drill.ts";
import { redactUrl } from "../../redact-url.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";
import { withFleet } from "../fleet.ts";

export function drillCommand(cmd: CommandOf<"drill">, env: CliEnv): Promise<number> {
  const { config } = env;
  return withFleet(env, cmd.by, async ({ ctx, configKv, workersKv, deps }) => {
    if (!config.DATABASE_URL) throw new UsageError("DATABASE_URL is required for drills");
    if (!config.DRILL_API_KEY)
      throw new UsageError("DRILL_API_KEY is required for drills (a client key of the gateway)");
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
      confirmed: cmd.yes === true,
      ...(cmd.json ? {} : { say: (l: string) => console.log(redactUrl(l)) }),
    });
    print(cmd.json, report, renderDrillReport(report));
    return report.passed ? 0 : 1;
  });
}
