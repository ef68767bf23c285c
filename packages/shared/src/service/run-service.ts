// The process shell every service's main.ts shares: a logger named for the app, peer resets
// survived, the configuration parsed once (a ConfigError, from the parse or the start, is printed
// naming the variables, exit 2), the service started, and SIGTERM/SIGINT stopping it once (drain, then
// exit 0).
import { ConfigError } from "../config.ts";
import { createLogger, type Logger } from "../log.ts";
import { survivePeerResets } from "./peer-errors.ts";

export interface ServiceShell<C> {
  name: string;
  loadConfig: (env: Record<string, string | undefined>) => C;
  start: (config: C, log: Logger) => Promise<{ stop(): Promise<void> }>;
}

export async function runService<C>(o: ServiceShell<C>): Promise<void> {
  const log = createLogger(o.name);
  survivePeerResets(log);
  let service: { stop(): Promise<void> };
  try {
    service = await o.start(o.loadConfig(process.env), log);
  } catch (err) {
    // A configuration error (found by the parse, or by the start itself) names what to fix.
    if (!(err instanceof ConfigError)) throw err;
    console.error(`${o.name}: ${err.message}`);
    process.exit(2);
  }
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, `${o.name} stopping`);
    await service.stop();
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}
