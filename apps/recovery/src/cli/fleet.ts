// The fleet commands (workers, config, rotate-key, audit, drill) work on one context and the
// region's config and workers buckets.
import type { KV } from "@nats-io/kv";
import { openConfigBucket, openWorkersBucket } from "@pipeline/shared/kv";
import { openContext, type RecoveryContext } from "../context.ts";
import type { ConfigDeps } from "../fleet/config-ops.ts";
import { actorOf, type CliEnv } from "./env.ts";

export interface Fleet {
  ctx: RecoveryContext;
  configKv: KV;
  workersKv: KV;
  /** The config operations' dependencies, acting as `--by` (or the login). */
  deps: ConfigDeps;
}

/** Opens the context and both buckets, runs `fn`, and closes the context whatever happens. */
export async function withFleet(
  env: CliEnv,
  by: string | undefined,
  fn: (f: Fleet) => Promise<number>,
): Promise<number> {
  const ctx = await openContext(env.config, env.log, "recovery-cli");
  try {
    const configKv = await openConfigBucket(ctx.nc, env.config.REGION);
    const workersKv = await openWorkersBucket(ctx.nc, env.config.REGION);
    const deps = { config: configKv, workers: workersKv, db: ctx.database.db, actor: actorOf(by) };
    return await fn({ ctx, configKv, workersKv, deps });
  } finally {
    await ctx.close();
  }
}
