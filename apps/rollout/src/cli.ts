// `npm run rollout -- <command>`: the shard assignment of a region's solver versions.
//   status                          who pulls which shard
//   shift <version> <N|P%>          give <version> N shards (or P% of them), taken from the others
//   reconcile                       make every version's lane consumers match the assignment (after an interrupted shift)
// Exit codes: 0 done, 1 failed, 2 usage or configuration error.
import { jetstreamManager } from "@nats-io/jetstream";
import { ConfigError } from "@pipeline/shared/config";
import { devStackEnv, devStackFile, readDevStack } from "@pipeline/shared/localstack";
import { connectNats, natsAuthFromEnv } from "@pipeline/shared/nats";
import { consumerVersions, openRolloutBucket, readAssignment, reconcileConsumers } from "@pipeline/shared/runtime";
import { z } from "zod";
import { loadConfig } from "./config.ts";
import { describeAssignment, shardCount, shiftTo, versionsOf } from "./shift.ts";

const USAGE = `usage: npm run rollout -- <command> [--json]
  status                     which solver version pulls which shard of REGION's TASKS
  shift <version> <N|P%>     give <version> N shards (or P% of them), taken from the other versions
  reconcile [--also v2,v3]   make the lane consumers match the assignment (after an interrupted shift)
Environment: NATS_URL, NATS_USER/NATS_PASSWORD or NATS_CREDS (the rollout user), REGION, ACK_WAIT_MS.`;

const Version = z.string().regex(/^[a-z0-9_]{1,32}$/, "lower-case letters, digits and '_'");

async function main(argv: string[]): Promise<number> {
  const json = argv.includes("--json");
  const alsoAt = argv.indexOf("--also");
  const also = alsoAt >= 0 ? (argv[alsoAt + 1] ?? "").split(",").filter(Boolean) : [];
  const args = argv.filter((a, i) => a !== "--json" && (alsoAt < 0 || (i !== alsoAt && i !== alsoAt + 1)));
  const [command, ...rest] = args;
  if (!command || command === "help" || command === "--help") {
    console.log(USAGE);
    return command ? 0 : 2;
  }
  let env = process.env as Record<string, string | undefined>;
  if (!env.NATS_URL) {
    const stack = readDevStack(devStackFile(env));
    if (stack) env = { ...env, ...devStackEnv(stack, "rollout", env) };
  }
  let config;
  try {
    config = loadConfig(env);
    for (const v of also) Version.parse(v);
  } catch (err) {
    console.error(`rollout: ${err instanceof ConfigError ? err.message : (err as Error).message}`);
    return 2;
  }
  const nc = await connectNats(config.NATS_URL, "rollout-cli", natsAuthFromEnv(config));
  try {
    const jsm = await jetstreamManager(nc);
    const kv = await openRolloutBucket(nc, config.REGION);
    const by = `rollout-cli ${process.env.USER ?? "?"}`;
    if (command === "status") {
      const cur = await readAssignment(kv);
      if (!cur) {
        console.log(json ? "null" : `region ${config.REGION}: no assignment yet (no solver has started)`);
        return 0;
      }
      console.log(json ? JSON.stringify({ region: config.REGION, revision: cur.revision, ...cur.assignment }) : `region ${config.REGION} (revision ${cur.revision}, ${cur.assignment.updatedAt} by ${cur.assignment.by})\n${describeAssignment(cur.assignment)}`);
      return 0;
    }
    if (command === "shift") {
      const version = Version.safeParse(rest[0]);
      if (!version.success || rest.length !== 2) {
        console.error(`rollout shift: takes <version> <N|P%>\n\n${USAGE}`);
        return 2;
      }
      const cur = await readAssignment(kv);
      let count: number;
      try {
        count = shardCount(rest[1]!, cur?.assignment.owners.length ?? 16);
      } catch (err) {
        console.error(`rollout shift: ${(err as Error).message}`);
        return 2;
      }
      const r = await shiftTo({ jsm, kv, region: config.REGION, to: version.data, count, by, ackWaitMs: config.ACK_WAIT_MS, versions: also });
      console.log(json ? JSON.stringify(r) : `moved ${r.moved.length ? r.moved.join(",") : "nothing"} to ${version.data}; now ${Object.entries(r.share).map(([v, n]) => `${v} ${n}`).join(", ")}; consumers changed: ${r.changed.length}`);
      return 0;
    }
    if (command === "reconcile") {
      const cur = await readAssignment(kv);
      if (!cur) throw new Error(`region ${config.REGION} has no assignment yet`);
      const r = await reconcileConsumers(jsm, config.REGION, cur.assignment, versionsOf(cur.assignment, [...(await consumerVersions(jsm, config.REGION)), ...also]), config.ACK_WAIT_MS);
      console.log(json ? JSON.stringify(r) : `reconciled: ${r.changed.length ? r.changed.join(", ") : "nothing to change"}`);
      return 0;
    }
    console.error(`rollout: unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
    return 2;
  } catch (err) {
    console.error(`rollout ${command}: ${(err as Error).message}`);
    return 1;
  } finally {
    await nc.close();
  }
}

process.exit(await main(Bun.argv.slice(2)));
