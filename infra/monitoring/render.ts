// `bun infra/monitoring/render.ts --inventory inventory.json --out DIR [--solver-ports 9464,9465]
//   [--rollout-host fsn1-app-1] [--webhook-url-file /etc/prometheus/alert-webhook-url]`:
// the monitoring host's files from the deploy's inventory: prometheus.yml, alerts.yml (a copy of
// infra/prometheus/alerts.yml), alertmanager.yml (the webhook from ALERT_WEBHOOK_URL, or the
// file that will hold it on the host) and nats-exporter.env; each checked by promtool/amtool.
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describeIssues } from "@pipeline/shared/schemas";
import { renderAlertmanagerConfig } from "./alertmanager-config.ts";
import { MonitoredInventory, renderNatsExporterEnv, renderPrometheusConfig } from "./prometheus-config.ts";
import { prometheusTools } from "./prometheus-tools.ts";

export const ALERTS_FILE = resolve(import.meta.dir, "..", "prometheus", "alerts.yml");

/** Reads the deploy's inventory (`terraform output -raw inventory`, or `-json`'s wrapped form); errors name the field. */
export function readMonitoredInventory(path: string): MonitoredInventory {
  let raw = JSON.parse(readFileSync(path, "utf8")) as unknown;
  if (raw && typeof raw === "object" && "value" in raw && "type" in raw) raw = (raw as { value: unknown }).value;
  const r = MonitoredInventory.safeParse(raw);
  if (!r.success) throw new Error(`inventory ${path}: ${describeIssues(r.error)}`);
  return r.data;
}

/** Runs promtool check config and amtool check-config on a rendered folder; throws with their output. */
export function checkRendered(dir: string): void {
  const t = prometheusTools();
  for (const [cmd, args] of [
    [t.promtool, ["check", "config", join(dir, "prometheus.yml")]],
    [t.amtool, ["check-config", join(dir, "alertmanager.yml")]],
  ] as const) {
    const r = spawnSync(cmd, args, { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`${args.join(" ")} failed:\n${r.stdout}${r.stderr}`);
  }
}

if (import.meta.main) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const inventory = arg("--inventory");
  const out = arg("--out");
  if (!inventory || !out) {
    console.error(
      "usage: bun infra/monitoring/render.ts --inventory inventory.json --out DIR [--solver-ports 9464,9465] [--rollout-host NAME] [--webhook-url-file PATH]",
    );
    process.exit(2);
  }
  try {
    const inv = readMonitoredInventory(inventory);
    const ports = arg("--solver-ports");
    const rolloutHost = arg("--rollout-host");
    const webhookUrlFile = arg("--webhook-url-file");
    mkdirSync(out, { recursive: true });
    // alerts.yml beside prometheus.yml: rule_files is relative to the config file.
    writeFileSync(
      join(out, "prometheus.yml"),
      renderPrometheusConfig(inv, {
        rulesFile: "alerts.yml",
        ...(ports ? { solverPorts: ports.split(",").map(Number) } : {}),
        ...(rolloutHost ? { rolloutHost } : {}),
      }),
    );
    copyFileSync(ALERTS_FILE, join(out, "alerts.yml"));
    const webhookUrl = process.env.ALERT_WEBHOOK_URL;
    writeFileSync(
      join(out, "alertmanager.yml"),
      renderAlertmanagerConfig(webhookUrlFile ? { webhookUrlFile } : webhookUrl ? { webhookUrl } : {}),
      { mode: 0o600 },
    );
    writeFileSync(join(out, "nats-exporter.env"), renderNatsExporterEnv(inv));
    checkRendered(out);
    console.log(`rendered and checked ${out}/prometheus.yml, alerts.yml, alertmanager.yml, nats-exporter.env`);
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
}
