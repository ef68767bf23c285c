export { type ExporterConfig, ExporterEnv, loadExporterConfig } from "./config.ts";
export { EXPOSITION_CONTENT_TYPE, type MetricType, renderExposition, type Sample } from "./exposition.ts";
export { Healthz, Jsz, MonitorJsonError, parseMonitorJson, Varz } from "./monitor-json.ts";
export { type MonitorSnapshot, natsMetrics } from "./nats-metrics.ts";
export { scrapeMonitor } from "./scrape.ts";
export { type ExporterDeps, exporterHandler, type RunningExporter, startExporter } from "./server.ts";
