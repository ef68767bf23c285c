// `recovery retention`: erase expired tokens, old params and callback URLs; delete old finished rows.
import { openDatabase } from "@pipeline/shared/db";
import { UsageError } from "../../context.ts";
import { retentionPolicy } from "../../retention/policy.ts";
import { runRetention } from "../../retention/retention.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";

export async function retentionCommand(cmd: CommandOf<"retention">, { config }: CliEnv): Promise<number> {
  if (!config.DATABASE_URL) throw new UsageError("DATABASE_URL is required for retention");
  const database = openDatabase(config.DATABASE_URL, { max: 2, appName: "recovery-retention" });
  try {
    const r = await runRetention(database.sql, retentionPolicy(config));
    print(
      cmd.json,
      r,
      `retention: ${r.tokensErased} token(s) erased, ${r.paramsPurged} task(s) stripped of params and callback URL, ${r.rowsDeleted} row(s) deleted with ${r.deliveriesDeleted} callback record(s) (${r.batches} batches, ${r.ms} ms)`,
    );
    return 0;
  } finally {
    await database.close();
  }
}
