import { createLogger } from "@pipeline/shared/log";
import { survivePeerResets } from "@pipeline/shared/runtime";
import { loadConfig } from "./config.ts";
import { startGateway } from "./service.ts";

const log = createLogger("gateway");
survivePeerResets(log);
const service = await startGateway(loadConfig(process.env), log);
let stopping = false;
async function stop(signal: string) {
  if (stopping) return;
  stopping = true;
  log.info({ signal }, "gateway stopping");
  await service.stop();
  process.exit(0);
}
process.on("SIGTERM", () => void stop("SIGTERM"));
process.on("SIGINT", () => void stop("SIGINT"));
