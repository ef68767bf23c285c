// prometheus.yml for the monitoring host, rendered from the deploy's inventory (Terraform's
// `inventory` output): which role listens where is fixed by docs/deploy.md and the env templates
// (infra/deploy/env/*.env.example), so a target list follows from the hosts and their roles.
import { z } from "zod";

/** The ports each role's services listen on for /metrics, on the host's private address. */
export const METRICS_PORTS = {
  /** GATEWAY_METRICS_PORT in gateway.env. */
  gateway: 9479,
  /** The first solver version's METRICS_PORT (captcha-pipeline-install solver-port gives 9464, 9465, ...). */
  solver: 9464,
  /** RECOVERY_METRICS_PORT in recovery.env. */
  recovery: 9477,
  /** ROLLOUT_HTTP_PORT in rollout.env. */
  rollout: 9478,
  /** Debian's prometheus-node-exporter, every host. */
  node: 9100,
  /** Debian's prometheus-postgres-exporter, postgres hosts. */
  postgres: 9187,
  /** nats-server's `http:` monitoring port, NATS and witness hosts (read by @pipeline/nats-exporter). */
  natsMonitor: 8222,
  /** @pipeline/nats-exporter on the monitoring host. */
  natsExporter: 7777,
} as const;

/** The inventory fields the monitoring needs; everything else in the deploy's inventory is ignored. */
export const MonitoredHost = z.object({
  name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, "lower-case letters, digits and '-'"),
  region: z.string().min(1),
  roles: z.array(z.string()).min(1),
  privateIp: z.string().regex(/^[0-9a-fA-F.:]+$/, "an IP address: Prometheus scrapes the private network"),
});
export type MonitoredHost = z.infer<typeof MonitoredHost>;
export const MonitoredInventory = z.object({ hosts: z.array(MonitoredHost).min(1) });
export type MonitoredInventory = z.infer<typeof MonitoredInventory>;

export interface PrometheusOptions {
  /** Other ports than production's (a test stack's free ports). */
  ports?: Partial<Record<keyof typeof METRICS_PORTS, number>>;
  /** Ports of the solver versions running (one per version during a rollout); default [9464]. */
  solverPorts?: number[];
  /** The host whose rollout.env is set (its unit runs nowhere else); default the first app host. */
  rolloutHost?: string;
  /** The monitoring host's own name (labels its node exporter and Prometheus itself). */
  monitoringHost?: string;
  /** Where alerts.yml is on the monitoring host. */
  rulesFile?: string;
  /** Alertmanager's address as Prometheus reaches it. */
  alertmanager?: string;
  /** Where the nats-exporter listens, as Prometheus reaches it. */
  natsExporter?: string;
  /** Only these jobs (a test stack runs part of the fleet); default every job. */
  only?: string[];
  /** Intervals: production's defaults (15 s); tests use shorter ones. */
  scrapeInterval?: string;
  evaluationInterval?: string;
}

type Target = { targets: string[]; labels: Record<string, string> };
type ScrapeConfig = Record<string, unknown> & { job_name: string; static_configs: Target[] };

const addr = (ip: string, port: number) => (ip.includes(":") ? `[${ip}]:${port}` : `${ip}:${port}`);
const labelsOf = (h: MonitoredHost) => ({ host: h.name, region: h.region });

/** The scrape configs: one job per service, each target labelled with its host and region. */
export function scrapeConfigs(inv: MonitoredInventory, o: PrometheusOptions = {}): ScrapeConfig[] {
  const P = { ...METRICS_PORTS, ...o.ports };
  const withRole = (role: string) => inv.hosts.filter((h) => h.roles.includes(role));
  const apps = withRole("app");
  const rolloutHost = o.rolloutHost ?? apps[0]?.name;
  if (o.rolloutHost && !apps.some((h) => h.name === o.rolloutHost))
    throw new Error(`rollout host ${o.rolloutHost} is not an app host of the inventory`);
  const job = (name: string, hosts: MonitoredHost[], ports: number[]): ScrapeConfig => ({
    job_name: name,
    static_configs: hosts.map((h) => ({ targets: ports.map((p) => addr(h.privateIp, p)), labels: labelsOf(h) })),
  });
  const monitoring = o.monitoringHost ?? "monitoring";
  const natsHosts = inv.hosts.filter((h) => h.roles.includes("nats") || h.roles.includes("witness"));
  return [
    job("gateway", apps, [P.gateway]),
    job("solver", apps, o.solverPorts ?? [P.solver]),
    job("recovery", apps, [P.recovery]),
    job(
      "rollout",
      apps.filter((h) => h.name === rolloutHost),
      [P.rollout],
    ),
    {
      job_name: "node",
      static_configs: [
        ...job("node", inv.hosts, [P.node]).static_configs,
        { targets: [`127.0.0.1:${P.node}`], labels: { host: monitoring, region: "" } },
      ],
    },
    job("postgres", withRole("postgres"), [P.postgres]),
    // Prometheus' multi-target pattern: the target is a NATS monitoring port, handed to the one
    // exporter as ?target=; `instance` stays the NATS server's address.
    {
      ...job("nats", natsHosts, [P.natsMonitor]),
      relabel_configs: [
        { source_labels: ["__address__"], target_label: "__param_target" },
        { source_labels: ["__address__"], target_label: "instance" },
        { target_label: "__address__", replacement: o.natsExporter ?? `127.0.0.1:${P.natsExporter}` },
      ],
    },
    {
      job_name: "prometheus",
      static_configs: [{ targets: ["127.0.0.1:9090"], labels: { host: monitoring, region: "" } }],
    },
    {
      job_name: "alertmanager",
      static_configs: [{ targets: [o.alertmanager ?? "127.0.0.1:9093"], labels: { host: monitoring, region: "" } }],
    },
  ].filter((j) => j.static_configs.length > 0 && (!o.only || o.only.includes(j.job_name)));
}

/** prometheus.yml as YAML text, with a header saying where it came from. */
export function renderPrometheusConfig(inv: MonitoredInventory, o: PrometheusOptions = {}): string {
  const config = {
    global: {
      scrape_interval: o.scrapeInterval ?? "15s",
      // Never longer than the interval (Prometheus refuses that): a test's 2 s interval times out at 2 s.
      scrape_timeout: o.scrapeInterval ?? "10s",
      evaluation_interval: o.evaluationInterval ?? "15s",
      external_labels: { monitor: "captcha-pipeline" },
    },
    rule_files: [o.rulesFile ?? "/etc/prometheus/alerts.yml"],
    alerting: { alertmanagers: [{ static_configs: [{ targets: [o.alertmanager ?? "127.0.0.1:9093"] }] }] },
    scrape_configs: scrapeConfigs(inv, o),
  };
  return `# Rendered by infra/monitoring/render.ts from the inventory: edit the inventory or the renderer, not this file.\n${Bun.YAML.stringify(config, null, 2)}\n`;
}

/** The nats-exporter's environment on the monitoring host: every NATS and witness node's monitoring port. */
export function renderNatsExporterEnv(inv: MonitoredInventory): string {
  const urls = inv.hosts
    .filter((h) => h.roles.includes("nats") || h.roles.includes("witness"))
    .map((h) => `http://${addr(h.privateIp, METRICS_PORTS.natsMonitor)}`);
  return `# Rendered by infra/monitoring/render.ts from the inventory.\nNATS_MONITOR_URLS=${urls.join(",")}\nNATS_EXPORTER_HOST=127.0.0.1\nNATS_EXPORTER_PORT=${METRICS_PORTS.natsExporter}\n`;
}
