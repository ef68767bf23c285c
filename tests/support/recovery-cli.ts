// `recovery <args>` against a test's stack, run as an operator runs it (the recovery CLI as its own
// process, with the stack's NATS as the recovery user, its database, region and provider).
import { join } from "node:path";
import { natsEnv } from "@pipeline/devstack";
import { PROVIDER_KEY, ROOT, type Stack } from "../harness.ts";

/** `recovery <args>` as its own process with `env` (over this process's environment): exit code, stdout and stderr. */
export async function spawnRecoveryCli(
  args: string[],
  env: Record<string, string | undefined>,
): Promise<{ code: number; out: string; err: string }> {
  const proc = Bun.spawn([process.execPath, join(ROOT, "apps", "recovery", "src", "cli.ts"), ...args], {
    env: { ...process.env, ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { code, out, err };
}

export function runRecoveryCli(
  s: Pick<Stack, "nats" | "tdb" | "emu">,
  o: { region: string; snapshotDir: string },
  args: string[],
): Promise<{ code: number; out: string; err: string }> {
  return spawnRecoveryCli(args, {
    NATS_URL: s.nats.url,
    ...natsEnv(s.nats, "recovery"),
    DATABASE_URL: s.tdb.url,
    REGION: o.region,
    SNAPSHOT_DIR: o.snapshotDir,
    PROVIDER_URL: s.emu.url,
    PROVIDER_KEY,
  });
}
