import { envInt, envList, parseEnv } from "@pipeline/shared/config";
import { z } from "zod";

/** A monitoring port's base URL (`http://10.0.1.20:8222`): scheme, host and port only. */
const MonitorUrl = z
  .string()
  .refine((s) => {
    try {
      const u = new URL(s);
      return (
        (u.protocol === "http:" || u.protocol === "https:") && (u.pathname === "/" || u.pathname === "") && !u.search
      );
    } catch {
      return false;
    }
  }, "each must be http(s)://host:port, with no path")
  .transform((s) => new URL(s).origin);

export const ExporterEnv = z.object({
  /**
   * The monitoring ports this exporter may read (comma list). One: `/metrics` reads it. Several:
   * `/metrics?target=host:port` picks one (Prometheus' multi-target pattern); no other address is fetched.
   */
  NATS_MONITOR_URLS: envList()
    .default(["http://127.0.0.1:8222"])
    .pipe(z.array(MonitorUrl).min(1, "name at least one monitoring URL")),
  NATS_EXPORTER_HOST: z.string().min(1).default("127.0.0.1"),
  NATS_EXPORTER_PORT: envInt(7777, 0, 65535),
  /** Each monitoring request's deadline; keep it under Prometheus' scrape_timeout (10 s by default). */
  NATS_EXPORTER_TIMEOUT_MS: envInt(5000, 100, 60_000),
  LOG_LEVEL: z.enum(["trace", "debug", "info", "warn", "error", "fatal"]).default("info"),
});
export type ExporterConfig = z.infer<typeof ExporterEnv>;

/** Parses the exporter's environment; a ConfigError names each variable at fault. */
export function loadExporterConfig(env: Record<string, string | undefined>): ExporterConfig {
  return parseEnv(ExporterEnv, env);
}
