// The monitoring host of the rehearsal (fsn1-mon-1, booted from infra/deploy/cloud-init/monitoring.yaml)
// wired as docs/deploy.md's deploy step would: prometheus.yml, alerts.yml, alertmanager.yml and
// nats-exporter.env rendered from the rehearsal's inventory by infra/monitoring, the alert webhook
// delivered as a secret file (/etc/prometheus/alert-webhook-url, 0640 root:prometheus, never in
// user-data), the nats-exporter binary shipped over SSH. Alertmanager posts to the alert receiver
// the rehearsal runs on the host side (10.77.0.1:ALERT_PORT), which prints `alert <name> after S s`.
//
// Intervals: scrape and evaluation every 5 s (production 15 s) so a drill is short; every `for:` of
// infra/prometheus/alerts.yml and Alertmanager's group_wait (10 s) are production's.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ReceivedAlert } from "../monitoring/alert-receiver.ts";
import { renderAlertmanagerConfig } from "../monitoring/alertmanager-config.ts";
import { renderNatsExporterEnv, renderPrometheusConfig } from "../monitoring/prometheus-config.ts";
import { ALERTS_FILE } from "../monitoring/render.ts";
import { ALERT_PORT, BRIDGE_IP, DATA, type HostSpec } from "./config.ts";
import { check, type Log, waitFor } from "./exec.ts";
import { asOps, asOpsChecked, putFile, sshArgs } from "./ops-ssh.ts";

export const ALERT_LOG = join(DATA, "logs", "alerts.log");
export const ALERT_URL = `http://${BRIDGE_IP}:${ALERT_PORT}`;
/** What the rehearsal's Prometheus uses instead of production's 15 s (the `for:` durations stay). */
export const REHEARSAL_INTERVAL = "5s";
const WEBHOOK_FILE = "/etc/prometheus/alert-webhook-url";

/** The monitoring host's files, from the fleet (every host but the LB, which has no exporter, and itself). */
export function monitoringFiles(hosts: HostSpec[], mon: HostSpec, alertsYml: string): Record<string, string> {
  const inv = {
    hosts: hosts
      .filter((h) => h.role !== "lb" && h.role !== "monitoring")
      .map((h) => ({ name: h.name, region: h.region, roles: [h.role], privateIp: h.ip })),
  };
  return {
    "prometheus.yml": renderPrometheusConfig(inv, {
      monitoringHost: mon.name,
      scrapeInterval: REHEARSAL_INTERVAL,
      evaluationInterval: REHEARSAL_INTERVAL,
      // The rollout on the first app host (up.ts deploys it there), as in production.
      only: ["gateway", "solver", "recovery", "rollout", "node", "postgres", "nats", "prometheus", "alertmanager"],
    }),
    "alerts.yml": alertsYml,
    "alertmanager.yml": renderAlertmanagerConfig({ webhookUrlFile: WEBHOOK_FILE }),
    "nats-exporter.env": renderNatsExporterEnv(inv),
  };
}

interface Target {
  labels: Record<string, string>;
  health: string;
  lastError: string;
}

/** Prometheus' active targets, read on the monitoring host (its API is on loopback). */
export function promTargets(mon: HostSpec, sshKey: string): Target[] {
  const out = asOps(mon, sshKey, "curl -fsS -m 5 'http://127.0.0.1:9090/api/v1/targets?state=active'").stdout;
  if (!out.trim()) return [];
  return (JSON.parse(out) as { data: { activeTargets: Target[] } }).data.activeTargets;
}

/** Files, webhook secret, exporter binary; the daemons restarted; then every target up. */
export async function setUpMonitoring(
  mon: HostSpec,
  hosts: HostSpec[],
  sshKey: string,
  natsExporterBinary: string,
  log: Log,
): Promise<{ targets: number; seconds: number }> {
  const t0 = Date.now();
  const files = monitoringFiles(hosts, mon, readFileSync(ALERTS_FILE, "utf8"));
  // The binary: scp as ops, then installed as root like a release (releases/<v>, current ->).
  check(["scp", ...sshArgs(sshKey), "-q", natsExporterBinary, `ops@${mon.ip}:/tmp/nats-exporter`]);
  asOpsChecked(
    mon,
    sshKey,
    "the monitoring files",
    [
      putFile("/etc/prometheus/prometheus.yml", files["prometheus.yml"]!, "0644"),
      putFile("/etc/prometheus/alerts.yml", files["alerts.yml"]!, "0644"),
      putFile("/etc/prometheus/alertmanager.yml", files["alertmanager.yml"]!, "0644"),
      // The webhook is a secret: delivered as the deploy of secrets would, a file Alertmanager reads.
      putFile(WEBHOOK_FILE, `${ALERT_URL}/alerts/hook\n`, "0640", "root", "prometheus"),
      putFile("/etc/captcha-pipeline/nats-exporter.env", files["nats-exporter.env"]!, "0600"),
      "install -d -m 0755 /opt/captcha-pipeline/nats-exporter/releases/v1",
      "install -m 0755 -o root -g root /tmp/nats-exporter /opt/captcha-pipeline/nats-exporter/releases/v1/nats-exporter",
      "rm -f /tmp/nats-exporter",
      "ln -sfn releases/v1 /opt/captcha-pipeline/nats-exporter/current",
      "promtool check config /etc/prometheus/prometheus.yml >/dev/null",
      "amtool check-config /etc/prometheus/alertmanager.yml >/dev/null",
      "systemctl restart prometheus.service prometheus-alertmanager.service nats-exporter.service",
    ].join("\n"),
    { timeoutMs: 60_000 },
  );
  let last: Target[] = [];
  await waitFor(
    "every Prometheus target up on the monitoring host",
    90_000,
    async () => {
      last = promTargets(mon, sshKey);
      return last.length > 0 && last.every((t) => t.health === "up") ? true : undefined;
    },
    1000,
  ).catch((err: Error) => {
    const down = last
      .filter((t) => t.health !== "up")
      .map((t) => `${t.labels.job} ${t.labels.instance}: ${t.lastError}`);
    throw new Error(`${err.message}; not up: ${down.join("; ")}`);
  });
  const seconds = Math.round((Date.now() - t0) / 100) / 10;
  log(
    `${mon.name}: Prometheus scrapes ${last.length} targets, all up (${seconds} s); alerts to ${ALERT_URL} (log ${ALERT_LOG})`,
  );
  writeFileSync(
    join(DATA, "monitoring-targets.txt"),
    last.map((t) => `${t.labels.job} ${t.labels.instance}\n`).join(""),
  );
  return { targets: last.length, seconds };
}

/** A notification as the receiver lists it (GET /alerts): alert-receiver.ts's ReceivedAlert. */
export type Received = Omit<ReceivedAlert, "receivedAt"> & { receivedAt: string };

/** Alerts the receiver got since its last mark (GET /alerts), as `alert <name> after S s` lines. */
export async function receivedAlerts(): Promise<Received[]> {
  const r = await fetch(`${ALERT_URL}/alerts`, { signal: AbortSignal.timeout(3000) });
  return (await r.json()) as Received[];
}

/** Restarts the receiver's clock (at a fault); what arrives after counts from here. */
export async function markAlerts(): Promise<number> {
  const before = (await receivedAlerts()).length;
  await fetch(`${ALERT_URL}/mark`, { method: "POST", signal: AbortSignal.timeout(3000) });
  return before;
}

/** Waits for a notification of `name` (firing by default) after index `from`; its delay since the mark. */
export async function waitForAlert(
  name: string,
  from: number,
  timeoutMs: number,
  status = "firing",
): Promise<Received> {
  let got: Received[] = [];
  try {
    return await waitFor(
      `the ${name} alert (${status}) at ${ALERT_URL}`,
      timeoutMs,
      async () => {
        got = (await receivedAlerts()).slice(from);
        return got.find((a) => a.name === name && a.status === status);
      },
      500,
    );
  } catch (err) {
    throw new Error(
      `${(err as Error).message}; received: ${got.map((a) => `${a.status} ${a.name}`).join(", ") || "nothing"}`,
    );
  }
}
