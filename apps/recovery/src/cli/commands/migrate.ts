// `recovery migrate`: apply the schema migrations (idempotent; one migrator at a time).
import { migrateDatabase } from "@pipeline/shared/db";
import { UsageError } from "../../context.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";

export async function migrateCommand(cmd: CommandOf<"migrate">, { config }: CliEnv): Promise<number> {
  if (!config.DATABASE_URL) throw new UsageError("DATABASE_URL is required for migrate");
  const r = await migrateDatabase(config.DATABASE_URL);
  print(
    cmd.json,
    r,
    `migrate: ${r.applied.length ? `applied ${r.applied.join(", ")}` : "nothing to apply"}; ${r.total} migration(s) in the database${r.waitedMs > 50 ? ` (waited ${r.waitedMs} ms for another migrator)` : ""}`,
  );
  return 0;
}
