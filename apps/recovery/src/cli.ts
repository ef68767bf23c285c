// The runbook as commands: `bun run recovery <command>`. Exit codes: 0 done / all good,
// 1 the command failed or something needs a human, 2 a usage or configuration error.
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { ConfigError } from "@pipeline/shared/config";
import { migrateDatabase, openDatabase } from "@pipeline/shared/db";
import { devStackEnv, devStackFile, readDevStack } from "@pipeline/shared/localstack";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, natsAuthFromEnv, type NatsConnection } from "@pipeline/shared/nats";
import { liveWorkers, openRegionBucket, openWorkersBucket } from "@pipeline/shared/runtime";
import { probeRegions, regionChecks } from "./assess/regions.ts";
import { assess, renderAssessment } from "./assess/assess.ts";
import { parseCommand, USAGE, type Command } from "./cli-args.ts";
import { print, runRuntimeCommand } from "./cli-runtime.ts";
import { loadConfig, type RecoveryConfig } from "./config.ts";
import { openContext, UsageError } from "./context.ts";
import { rebuildQueue } from "./queue/rebuild-queue.ts";
import { listSnapshots, resolveSnapshot } from "./snapshot/manifest.ts";
import { restoreSnapshot } from "./snapshot/restore.ts";
import { takeSnapshot } from "./snapshot/take-snapshot.ts";
import { verifySnapshot } from "./snapshot/verify.ts";
import { copySnapshotOffHost, fetchOffHost, listOffHost, offHostBucket, offHostRecord } from "./snapshot/offhost.ts";
import { runRetention } from "./retention/retention.ts";
import { retentionPolicy } from "./retention/policy.ts";
import { recoverStale } from "./sweep/recover-stale.ts";

const log = createLogger("recovery", { level: process.env.LOG_LEVEL ?? "warn" });

/** Connects to NATS or gives up after `ms` (the client itself would wait forever). */
async function natsWithin(config: RecoveryConfig, ms: number): Promise<NatsConnection> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      connectNats(config.NATS_URL, "recovery-cli", natsAuthFromEnv(config), (e) => log.error({ err: e.message }, "nats error")),
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no NATS at ${config.NATS_URL} within ${ms} ms`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}


async function run(cmd: Command, config: RecoveryConfig): Promise<number> {
  switch (cmd.command) {
    case "help":
      console.log(USAGE);
      return 0;
    case "assess": {
      const nc = await natsWithin(config, 3000).catch((e: Error) => e);
      const jsm = nc instanceof Error ? nc : await jetstreamManager(nc).catch((e: Error) => e);
      const database = config.DATABASE_URL ? openDatabase(config.DATABASE_URL, { max: 2, appName: "recovery-assess" }) : undefined;
      const sql = database ? await database.sql`select 1`.then(() => database.sql).catch((e: Error) => e) : new Error("DATABASE_URL is not set");
      try {
        const workers = nc instanceof Error ? undefined : await openWorkersBucket(nc, config.REGION).then((kv) => liveWorkers(kv)).then((w) => w.workers).catch((e: Error) => e);
        const remotes = config.regions.filter((r) => r !== config.REGION);
        const regions =
          remotes.length && !(nc instanceof Error) && !(jsm instanceof Error)
            ? await openRegionBucket(nc, config.REGION)
                .then((kv) => probeRegions(jsm, kv, config.REGION, remotes))
                .then((p) => regionChecks(p))
                .catch((e: Error) => [{ name: "lease", level: "fail" as const, summary: `region state unreadable: ${e.message}` }])
            : undefined;
        const a = await assess({
          ...(workers ? { workers } : {}),
          ...(regions ? { regionChecks: regions } : {}),
          ...(nc instanceof Error || !nc.info ? {} : { natsServer: { version: nc.info.version, url: config.NATS_URL } }),
          region: config.REGION,
          jsm,
          sql,
          snapshotDir: config.SNAPSHOT_DIR,
          snapshotMaxAgeMs: config.SNAPSHOT_MAX_AGE_MS,
          ...(config.offHostDomain ? { offHostDomain: config.offHostDomain } : {}),
          staleAfterMs: config.STALE_AFTER_MS,
          provider: { url: config.PROVIDER_URL, key: config.PROVIDER_KEY, timeoutMs: config.PROVIDER_TIMEOUT_MS },
        });
        print(cmd.json, a, renderAssessment(a));
        return a.level === "fail" ? 1 : 0;
      } finally {
        if (!(nc instanceof Error)) await nc.close();
        await database?.close();
      }
    }
    case "migrate": {
      if (!config.DATABASE_URL) throw new UsageError("DATABASE_URL is required for migrate");
      const r = await migrateDatabase(config.DATABASE_URL);
      print(cmd.json, r, `migrate: ${r.applied.length ? `applied ${r.applied.join(", ")}` : "nothing to apply"}; ${r.total} migration(s) in the database${r.waitedMs > 50 ? ` (waited ${r.waitedMs} ms for another migrator)` : ""}`);
      return 0;
    }
    case "recover-stale": {
      const ctx = await openContext(config, log, "recovery-cli");
      try {
        const r = await recoverStale(ctx, { staleAfterMs: cmd["older-than"] ?? config.STALE_AFTER_MS });
        const lines = [
          `stale sweep: ${r.candidates} candidate(s), ${r.republished} re-published, ${r.withMessage} still have a message, ${r.changed} changed meanwhile, ${r.duplicates} already re-published (${r.ms} ms; scanned ${r.scan.messages} messages)`,
          ...r.tasks.slice(0, 50).map((t) => `  ${t.id}  ${t.state.padEnd(8)} v${t.version}  ${t.why.padEnd(13)}  ${t.action}`),
        ];
        print(cmd.json, r, lines.join("\n"));
        return 0;
      } finally {
        await ctx.close();
      }
    }
    case "rebuild-queue": {
      const ctx = await openContext(config, log, "recovery-cli");
      try {
        const r = await rebuildQueue(ctx, { gatewayGraceMs: config.GATEWAY_PUBLISH_GRACE_MS });
        print(
          cmd.json,
          r,
          `rebuild-queue: ${r.stream} ${r.created ? "was missing and is created" : "exists"}; ${r.open} unfinished task(s): ${r.republished} re-published, ${r.withMessage} already had a message, ${r.duplicates} deduplicated, ${r.deferred} fresh ones re-checked after the gateway's grace (${r.ms} ms)\n` +
            "next: restart the solvers if TASKS was recreated (they recreate their consumers on start)",
        );
        return 0;
      } finally {
        await ctx.close();
      }
    }
    case "snapshot": {
      if (!config.DATABASE_URL) throw new UsageError("DATABASE_URL is required for snapshot");
      const nc = await natsWithin(config, 5000);
      try {
        const s = await takeSnapshot({ databaseUrl: config.DATABASE_URL, dir: config.SNAPSHOT_DIR, keep: config.SNAPSHOT_KEEP, region: config.REGION, jsm: await jetstreamManager(nc), log });
        const copy = config.offHostDomain
          ? await copySnapshotOffHost({ nc, domain: config.offHostDomain, bucket: offHostBucket(config.REGION) }, s, config.SNAPSHOT_OFFHOST_KEEP ?? config.SNAPSHOT_KEEP).catch((e: Error) => e)
          : undefined;
        const where = copy === undefined ? "no off-host copy (SNAPSHOT_OFFHOST is none)" : copy instanceof Error ? `OFF-HOST COPY FAILED: ${copy.message}` : `copied to ${copy.domain}/${copy.bucket} and verified (${copy.copyMs} ms)`;
        print(cmd.json, { ...s.manifest, offHost: copy instanceof Error ? { error: copy.message } : (copy ?? null) }, `snapshot ${s.manifest.name}: ${s.manifest.bytes} bytes, sha256 ${s.manifest.sha256.slice(0, 16)}…, EVENTS seq ${s.manifest.events.lastSeq}, ${s.manifest.tookMs} ms\n  ${s.dumpPath}\n  ${where}`);
        return copy instanceof Error ? 1 : 0;
      } finally {
        await nc.close();
      }
    }
    case "snapshots": {
      const all = listSnapshots(config.SNAPSHOT_DIR);
      // The copies held in the other region, when one is configured and reachable.
      let remote: Awaited<ReturnType<typeof listOffHost>> | Error | undefined;
      if (config.offHostDomain) {
        const nc = await natsWithin(config, 5000).catch((e: Error) => e);
        remote = nc instanceof Error ? nc : await listOffHost({ nc, domain: config.offHostDomain, bucket: offHostBucket(config.REGION) }).catch((e: Error) => e).finally(() => nc.close());
      }
      const remoteNames = new Set(remote instanceof Array ? remote.map((m) => m.name) : []);
      const rows = all.map((s) => ({ ...s.manifest, local: true, offHost: offHostRecord(s) ?? null, inOffHostBucket: remoteNames.has(s.manifest.name) }));
      const only = remote instanceof Array ? remote.filter((m) => !all.some((s) => s.manifest.name === m.name)).map((m) => ({ ...m, local: false, offHost: null, inOffHostBucket: true })) : [];
      const where = (r: (typeof rows)[number]) => [r.local ? "local" : "", r.offHost ? `${r.offHost.domain}/${r.offHost.bucket} (verified ${r.offHost.verifiedAt})` : r.inOffHostBucket ? `${config.offHostDomain} (unverified)` : ""].filter(Boolean).join(" + ") || "-";
      const lines = [...rows, ...only].sort((a, b) => b.createdAt.localeCompare(a.createdAt)).map((r) => `${r.name}  ${String(r.bytes).padStart(10)} B  events seq ${r.events.lastSeq}  ${where(r)}`);
      if (remote instanceof Error) lines.push(`off-host copies in ${config.offHostDomain}: unreadable (${remote.message})`);
      if (!config.offHostDomain) lines.push("off-host copies: none configured (SNAPSHOT_OFFHOST)");
      print(cmd.json, { snapshots: [...rows, ...only], offHostDomain: config.offHostDomain ?? null, offHostError: remote instanceof Error ? remote.message : null }, lines.length ? lines.join("\n") : `no snapshot in ${config.SNAPSHOT_DIR}`);
      return 0;
    }
    case "retention": {
      if (!config.DATABASE_URL) throw new UsageError("DATABASE_URL is required for retention");
      const database = openDatabase(config.DATABASE_URL, { max: 2, appName: "recovery-retention" });
      try {
        const r = await runRetention(database.sql, retentionPolicy(config));
        print(cmd.json, r, `retention: ${r.tokensErased} token(s) erased, ${r.paramsPurged} task(s) stripped of params and callback URL, ${r.rowsDeleted} row(s) deleted with ${r.deliveriesDeleted} callback record(s) (${r.batches} batches, ${r.ms} ms)`);
        return 0;
      } finally {
        await database.close();
      }
    }
    case "restore": {
      const nc = cmd["no-replay"] && !cmd.from ? undefined : await natsWithin(config, 5000);
      try {
        // --from: the off-host copy, fetched into SNAPSHOT_DIR and checked against its manifest.
        const snapshot = cmd.from ? await fetchOffHost({ nc: nc!, domain: cmd.from, bucket: offHostBucket(config.REGION) }, cmd.args[0], config.SNAPSHOT_DIR) : resolveSnapshot(config.SNAPSHOT_DIR, cmd.args[0]);
        const eventsDomain = cmd["events-from"];
        const r = await restoreSnapshot({
          snapshot,
          intoUrl: cmd.into,
          ...(nc && !cmd["no-replay"]
            ? { nats: eventsDomain ? { js: jetstream(nc, { domain: eventsDomain }), jsm: await jetstreamManager(nc, { domain: eventsDomain }), mirror: true } : { js: jetstream(nc), jsm: await jetstreamManager(nc) } }
            : {}),
          ...(cmd["allow-gap"] ? { allowGap: true } : {}),
        });
        const replay = r.replay ? `replayed ${r.replay.events} events (seq ${r.replay.fromSeq}..${r.replay.toSeq}): ${Object.entries(r.replay.counts).map(([k, v]) => `${k}=${v}`).join(" ")}` : "no replay (--no-replay)";
        print(cmd.json, r, `restored ${r.snapshot} into ${r.into} in ${r.restoreMs} ms; ${replay}; ${r.totalMs} ms in all\ntasks: ${Object.entries(r.tasks).map(([k, v]) => `${k}=${v}`).join(" ")}\nnext: point the apps at it (DATABASE_URL, or rename the database), then recover-stale`);
        return 0;
      } finally {
        await nc?.close();
      }
    }
    case "workers":
    case "config":
    case "rotate-key":
    case "audit":
    case "drill":
      return runRuntimeCommand(cmd, config, log);
    case "verify": {
      if (!config.DATABASE_URL) throw new UsageError("DATABASE_URL is required for verify (its server hosts the scratch database)");
      const r = await verifySnapshot(resolveSnapshot(config.SNAPSHOT_DIR, cmd.args[0]), config.DATABASE_URL);
      print(cmd.json, r, `verified ${r.snapshot}: checksum ok, restored into a scratch database (${r.ms} ms)\n${Object.entries(r.tables).map(([k, v]) => `  ${k.padEnd(40)} ${v}`).join("\n")}`);
      return 0;
    }
  }
}

/**
 * With neither DATABASE_URL nor NATS_URL set, the settings of a running dev stack (`npm run dev`
 * writes them to .data/dev-stack.json; DEV_STACK_FILE overrides), as the recovery user.
 */
function withDevStack(env: Record<string, string | undefined>): Record<string, string | undefined> {
  if (env.DATABASE_URL || env.NATS_URL) return env;
  const stack = readDevStack(devStackFile(env));
  return stack ? { ...env, ...devStackEnv(stack, "recovery", env) } : env;
}

async function main(argv: string[]): Promise<number> {
  const parsed = parseCommand(argv);
  if (!parsed.ok) {
    console.error(`recovery: ${parsed.error}\n\n${USAGE}`);
    return 2;
  }
  let config: RecoveryConfig;
  try {
    config = loadConfig(withDevStack(process.env));
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`recovery: ${err.message}`);
      return 2;
    }
    throw err;
  }
  try {
    return await run(parsed.command, config);
  } catch (err) {
    const e = err as Error;
    console.error(`recovery ${parsed.command.command}: ${e.name === "Error" ? "" : `${e.name}: `}${e.message}`);
    return e instanceof UsageError ? 2 : 1;
  }
}

process.exit(await main(Bun.argv.slice(2)));
