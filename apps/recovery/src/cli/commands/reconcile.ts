// `recovery reconcile`: the ledger against the provider's balance samples; exit 1 beyond the tolerance.
import { openDatabase } from "@pipeline/shared/db";
import { UsageError } from "../../context.ts";
import { renderReconciliations } from "../../money/reconcile.ts";
import { runReconcile } from "../../money/run-reconcile.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";

export async function reconcileCommand(cmd: CommandOf<"reconcile">, { config }: CliEnv): Promise<number> {
  if (!config.DATABASE_URL) throw new UsageError("DATABASE_URL is required for reconcile");
  const database = openDatabase(config.DATABASE_URL, { max: 2, appName: "recovery-reconcile" });
  try {
    const hours = cmd.hours ?? config.RECONCILE_HOURS;
    const r = await runReconcile(database.sql, hours, config.RECONCILE_TOLERANCE_MICROS);
    print(cmd.json, r, renderReconciliations(r.accounts, hours, r.toleranceMicros));
    return r.differs ? 1 : 0;
  } finally {
    await database.close();
  }
}
