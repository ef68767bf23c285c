// `recovery snapshot`: pg_dump + the EVENTS sequence into SNAPSHOT_DIR, then the off-host copy.
import { jetstreamManager } from "@nats-io/jetstream";
import { RECOVERY_JS_API_TIMEOUT_MS, UsageError } from "../../context.ts";
import { copySnapshotOffHost, offHostBucket } from "../../snapshot/offhost.ts";
import { takeSnapshot } from "../../snapshot/take-snapshot.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, natsWithin, print } from "../env.ts";

/** Exit 1 when the off-host copy failed (the local snapshot is kept). */
export async function snapshotCommand(cmd: CommandOf<"snapshot">, env: CliEnv): Promise<number> {
  const { config, log } = env;
  if (!config.DATABASE_URL) throw new UsageError("DATABASE_URL is required for snapshot");
  const nc = await natsWithin(env, 5000);
  try {
    const s = await takeSnapshot({
      databaseUrl: config.DATABASE_URL,
      dir: config.SNAPSHOT_DIR,
      keep: config.SNAPSHOT_KEEP,
      region: config.REGION,
      jsm: await jetstreamManager(nc, { timeout: RECOVERY_JS_API_TIMEOUT_MS }),
      log,
    });
    const copy = config.offHostDomain
      ? await copySnapshotOffHost(
          { nc, domain: config.offHostDomain, bucket: offHostBucket(config.REGION) },
          s,
          config.SNAPSHOT_OFFHOST_KEEP ?? config.SNAPSHOT_KEEP,
        ).catch((e: Error) => e)
      : undefined;
    const where =
      copy === undefined
        ? "no off-host copy (SNAPSHOT_OFFHOST is none)"
        : copy instanceof Error
          ? `OFF-HOST COPY FAILED: ${copy.message}`
          : `copied to ${copy.domain}/${copy.bucket} and verified (${copy.copyMs} ms)`;
    print(
      cmd.json,
      { ...s.manifest, offHost: copy instanceof Error ? { error: copy.message } : (copy ?? null) },
      `snapshot ${s.manifest.name}: ${s.manifest.bytes} bytes, sha256 ${s.manifest.sha256.slice(0, 16)}…, EVENTS seq ${s.manifest.events.lastSeq}, ${s.manifest.tookMs} ms\n  ${s.dumpPath}\n  ${where}`,
    );
    return copy instanceof Error ? 1 : 0;
  } finally {
    await nc.close();
  }
}
