// The runbook as commands: `bun run recovery <command>`. Exit codes: 0 done / all good,
// 1 the command failed or something needs a human, 2 a usage or configuration error.
// Each command lives in cli/commands/<command>.ts; this file parses, configures and dispatches.
import { ConfigError } from "@pipeline/shared/config";
import { devStackEnv, devStackFile, readDevStack } from "@pipeline/shared/dev-stack-file";
import { createLogger } from "@pipeline/shared/log";
import { parseCommand, USAGE } from "./cli/args.ts";
import { dispatch } from "./cli/commands/index.ts";
import { loadConfig, type RecoveryConfig } from "./config.ts";
import { UsageError } from "./context.ts";
import { redactUrl } from "./redact-url.ts";

/**
 * With neither DATABASE_URL nor NATS_URL set, the settings of a running dev stack (`npm run dev`
 * writes them to .data/dev-stack.json; DEV_STACK_FILE overrides), as the recovery user.
 */
function withDevStack(env: Record<string, string | undefined>): Record<string, string | undefined> {
  if (env.DATABASE_URL || env.NATS_URL) return env;
  const stack = readDevStack(devStackFile(env));
  return stack ? { ...env, ...devStackEnv(stack, "recovery", env) } : env;
}

/** The configuration, or the message of a configuration error (exit 2). */
function configure(): RecoveryConfig | ConfigError {
  try {
    return loadConfig(withDevStack(process.env));
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
}

async function main(argv: string[]): Promise<number> {
  const parsed = parseCommand(argv);
  if (!parsed.ok) {
    console.error(`recovery: ${parsed.error}\n\n${USAGE}`);
    return 2;
  }
  const config = configure();
  if (config instanceof ConfigError) {
    console.error(redactUrl(`recovery: ${config.message}`));
    return 2;
  }
  const log = createLogger("recovery", { level: process.env.LOG_LEVEL ?? "warn" });
  try {
    return await dispatch(parsed.command, { config, log });
  } catch (err) {
    const e = err as Error;
    console.error(
      redactUrl(`recovery ${parsed.command.command}: ${e.name === "Error" ? "" : `${e.name}: `}${e.message}`),
    );
    return e instanceof UsageError ? 2 : 1;
  }
}

process.exit(await main(Bun.argv.slice(2)));
