// `npm run rollout -- <command>`: rollouts of a solver version across the regions, and the shard
// assignment underneath. Exit codes: 0 done, 1 failed, 2 usage or configuration error, 3 refused
// (the record's state does not allow the command). Each command lives in cli/commands/<command>.ts;
// this file parses, configures, connects and dispatches.
import { devStackEnv, devStackFile, readDevStack } from "@pipeline/shared/dev-stack-file";
import { parseArgs, USAGE, Version } from "./cli/args.ts";
import { COMMANDS } from "./cli/commands/index.ts";
import { withCliContext } from "./cli/context.ts";
import { loadConfig, type RegionEndpoint, type RolloutConfig, regionEndpoints } from "./config.ts";

/** Without NATS_URL, the settings of a running dev stack (`npm run dev`; DEV_STACK_FILE overrides), as the rollout user. */
function withDevStack(env: Record<string, string | undefined>): Record<string, string | undefined> {
  if (env.NATS_URL) return env;
  const stack = readDevStack(devStackFile(env));
  return stack ? { ...env, ...devStackEnv(stack, "rollout", env) } : env;
}

/** The configuration and every region's endpoint, or the message of a configuration error (exit 2). */
function configure(
  env: Record<string, string | undefined>,
  also: string[],
): { config: RolloutConfig; endpoints: RegionEndpoint[] } | { error: string } {
  try {
    const config = loadConfig(env);
    for (const v of also) Version.parse(v);
    return { config, endpoints: regionEndpoints(config, env, { needDatabase: false }) };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

async function main(argv: string[]): Promise<number> {
  const a = parseArgs(argv);
  if (a.kind === "help") {
    console.log(USAGE);
    return a.exitCode;
  }
  if (a.kind === "unknown") {
    console.error(`rollout: unknown command ${JSON.stringify(a.verb)}\n\n${USAGE}`);
    return 2;
  }
  const entry = COMMANDS[a.verb];
  const env = withDevStack(process.env);
  if (entry.reach === "none") return await entry.run(env);
  const setup = configure(env, a.also);
  if ("error" in setup) {
    console.error(`rollout: ${setup.error}`);
    return 2;
  }
  try {
    return await withCliContext({ ...setup, reach: entry.reach, json: a.json }, (ctx) => entry.run(ctx, a));
  } catch (err) {
    const msg = (err as Error).message;
    console.error(`rollout ${a.verb}: ${msg}`);
    return msg.startsWith("start:") ? 2 : 1;
  }
}

process.exit(await main(Bun.argv.slice(2)));
