// Wiring only: env -> logger -> exporter -> listen; stop on SIGINT/SIGTERM.
import { createLogger } from "@pipeline/shared/log";
import { loadExporterConfig } from "./config.ts";
import { scrapeMonitor } from "./scrape.ts";
import { startExporter } from "./server.ts";

let config: ReturnType<typeof loadExporterConfig>;
try {
  config = loadExporterConfig(process.env);
} catch (err) {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(2);
}

const log = createLogger("nats-exporter", { level: config.LOG_LEVEL });
const exporter = startExporter({
  host: config.NATS_EXPORTER_HOST,
  port: config.NATS_EXPORTER_PORT,
  monitorUrls: config.NATS_MONITOR_URLS,
  scrape: (base) => scrapeMonitor(base, { timeoutMs: config.NATS_EXPORTER_TIMEOUT_MS }),
  log,
});
log.info({ url: exporter.url, port: exporter.port, targets: config.NATS_MONITOR_URLS }, "nats-exporter listening");

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  await exporter.stop();
  log.info({ signal }, "nats-exporter stopped");
  process.exit(0);
}
process.on("SIGINT", () => void shutdown("SIGINT"));
process.on("SIGTERM", () => void shutdown("SIGTERM"));
