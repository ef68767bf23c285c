// `recovery verify`: checksum + a restore into a scratch database + row counts; drops it.
import { UsageError } from "../../context.ts";
import { resolveSnapshot } from "../../snapshot/manifest.ts";
import { verifySnapshot } from "../../snapshot/verify.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";

export async function verifyCommand(cmd: CommandOf<"verify">, { config }: CliEnv): Promise<number> {
  if (!config.DATABASE_URL)
    throw new UsageError("DATABASE_URL is required for verify (its server hosts the scratch database)");
  const r = await verifySnapshot(resolveSnapshot(config.SNAPSHOT_DIR, cmd.args[0]), config.DATABASE_URL);
  print(
    cmd.json,
    r,
    `verified ${r.snapshot}: checksum ok, restored into a scratch database (${r.ms} ms)\n${Object.entries(r.tables)
      .map(([k, v]) => `  ${k.padEnd(40)} ${v}`)
      .join("\n")}`,
  );
  return 0;
}
