// The rollout service (issue 15): `bun apps/rollout/src/main.ts`, or `npm run rollout -- serve`.
import { ConfigError } from "@pipeline/shared/config";
import { createLogger } from "@pipeline/shared/log";
import { survivePeerResets } from "@pipeline/shared/runtime";
import { loadConfig } from "./config.ts";
import { startRollout } from "./service.ts";

const log = createLogger("rollout");
survivePeerResets(log);
let service: Awaited<ReturnType<typeof startRollout>>;
try {
  service = await startRollout(loadConfig(process.env), process.env, log);
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(`rollout: ${err.message}`);
    process.exit(2);
  }
  throw err;
}
let stopping = false;
async function stop(signal: string) {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, "rollout stopping");
  await service.stop();
  process.exit(0);
}
process.on("SIGTERM", () => void stop("SIGTERM"));
process.on("SIGINT", () => void stop("SIGINT"));
