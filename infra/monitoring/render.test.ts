// The monitoring host's files rendered from an inventory shaped like Terraform's, then checked by
// Debian's promtool and amtool (the versions the monitoring host runs).
import { expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readSlackAlert } from "./alert-receiver.ts";
import { renderAlertmanagerConfig } from "./alertmanager-config.ts";
import { type MonitoredInventory, renderNatsExporterEnv, renderPrometheusConfig } from "./prometheus-config.ts";
import { ALERTS_FILE, checkRendered, readMonitoredInventory } from "./render.ts";

const host = (name: string, region: string, role: string, privateIp: string) => ({
  name,
  region,
  roles: [role],
  privateIp,
  ssh: { host: privateIp, user: role === "app" ? "deploy" : "ops", port: 22 },
  hostKeys: ["SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"],
});
const INVENTORY = {
  hosts: [
    host("fsn1-app-1", "fsn1", "app", "10.0.1.10"),
    host("fsn1-app-2", "fsn1", "app", "10.0.1.11"),
    host("fsn1-nats-1", "fsn1", "nats", "10.0.1.20"),
    host("fsn1-nats-2", "fsn1", "nats", "10.0.1.21"),
    host("fsn1-nats-3", "fsn1", "nats", "10.0.1.22"),
    host("fsn1-pg-1", "fsn1", "postgres", "10.0.1.30"),
    host("hel1-app-1", "hel1", "app", "10.0.2.10"),
    host("hel1-pg-1", "hel1", "postgres", "10.0.2.30"),
    host("nbg1-witness-1", "nbg1", "witness", "10.0.100.10"),
  ],
};

type Job = { job_name: string; static_configs: Array<{ targets: string[]; labels: Record<string, string> }> };
const jobs = (text: string) =>
  Object.fromEntries(
    (Bun.YAML.parse(text) as { scrape_configs: Job[] }).scrape_configs.map((j) => [
      j.job_name,
      j.static_configs.flatMap((s) => s.targets.map((t) => `${s.labels.host} ${t}`)),
    ]),
  );

test("every role's services are scraped on their private address, labelled with host and region", () => {
  const inv = INVENTORY as MonitoredInventory;
  const j = jobs(renderPrometheusConfig(inv, { monitoringHost: "nbg1-monitoring-1" }));
  expect(j.gateway).toEqual(["fsn1-app-1 10.0.1.10:9479", "fsn1-app-2 10.0.1.11:9479", "hel1-app-1 10.0.2.10:9479"]);
  expect(j.solver).toEqual(["fsn1-app-1 10.0.1.10:9464", "fsn1-app-2 10.0.1.11:9464", "hel1-app-1 10.0.2.10:9464"]);
  expect(j.recovery).toHaveLength(3);
  // The rollout service runs on one host (where rollout.env is): the first app host by default.
  expect(j.rollout).toEqual(["fsn1-app-1 10.0.1.10:9478"]);
  expect(j.node).toHaveLength(INVENTORY.hosts.length + 1);
  expect(j.node).toContain("nbg1-monitoring-1 127.0.0.1:9100");
  expect(j.postgres).toEqual(["fsn1-pg-1 10.0.1.30:9187", "hel1-pg-1 10.0.2.30:9187"]);
  expect(j.nats).toEqual([
    "fsn1-nats-1 10.0.1.20:8222",
    "fsn1-nats-2 10.0.1.21:8222",
    "fsn1-nats-3 10.0.1.22:8222",
    "nbg1-witness-1 10.0.100.10:8222",
  ]);
  // During a rollout: both versions' ports; the rollout host named.
  const r = jobs(renderPrometheusConfig(inv, { solverPorts: [9464, 9465], rolloutHost: "hel1-app-1" }));
  expect(r.solver).toContain("fsn1-app-2 10.0.1.11:9465");
  expect(r.rollout).toEqual(["hel1-app-1 10.0.2.10:9478"]);
  expect(() => renderPrometheusConfig(inv, { rolloutHost: "fsn1-pg-1" })).toThrow(/not an app host/);
  expect(renderNatsExporterEnv(inv)).toContain(
    "NATS_MONITOR_URLS=http://10.0.1.20:8222,http://10.0.1.21:8222,http://10.0.1.22:8222,http://10.0.100.10:8222\n",
  );
});

test("promtool and amtool accept what is rendered: with the webhook URL, and with it in a file", () => {
  const dir = mkdtempSync(join(tmpdir(), "monitoring-render-"));
  try {
    const inventory = join(dir, "inventory.json");
    // `terraform output -json inventory` wraps the value.
    writeFileSync(inventory, JSON.stringify({ value: INVENTORY, type: ["object", {}], sensitive: false }));
    const inv = readMonitoredInventory(inventory);
    writeFileSync(join(dir, "prometheus.yml"), renderPrometheusConfig(inv, { rulesFile: "alerts.yml" }));
    copyFileSync(ALERTS_FILE, join(dir, "alerts.yml"));
    writeFileSync(
      join(dir, "alertmanager.yml"),
      renderAlertmanagerConfig({ webhookUrl: "https://hooks.example.com/services/T0/B0/x" }),
    );
    checkRendered(dir);
    writeFileSync(
      join(dir, "alertmanager.yml"),
      renderAlertmanagerConfig({ webhookUrlFile: "/etc/prometheus/alert-webhook-url" }),
    );
    checkRendered(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

test("one webhook setting: both or neither refused; a bad inventory names the field", () => {
  expect(() => renderAlertmanagerConfig({})).toThrow(/one of the two/);
  expect(() => renderAlertmanagerConfig({ webhookUrl: "https://a", webhookUrlFile: "/f" })).toThrow(/one of the two/);
  expect(() => renderAlertmanagerConfig({ webhookUrl: "slack" })).toThrow(/http\(s\) URL/);
  const am = Bun.YAML.parse(renderAlertmanagerConfig({ webhookUrl: "https://hooks.example.com/x" })) as {
    route: { receiver: string; routes?: unknown };
    receivers: Array<{ name: string; slack_configs: Array<{ api_url: string; send_resolved: boolean }> }>;
  };
  expect(am.route.receiver).toBe("webhook");
  expect(am.route.routes).toBeUndefined();
  expect(am.receivers).toHaveLength(1);
  expect(am.receivers[0]!.slack_configs[0]).toMatchObject({
    api_url: "https://hooks.example.com/x",
    send_resolved: true,
  });
  const dir = mkdtempSync(join(tmpdir(), "monitoring-inv-"));
  try {
    const bad = join(dir, "inventory.json");
    writeFileSync(bad, JSON.stringify({ hosts: [{ name: "fsn1-app-1", region: "fsn1", roles: ["app"] }] }));
    expect(() => readMonitoredInventory(bad)).toThrow(/hosts\.0\.privateIp/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the receiver reads the alert's name and status from the rendered title; a body that is not Slack's is refused naming the field", () => {
  const a = readSlackAlert(
    { attachments: [{ title: "[FIRING:2] AppDown", text: "solver on a ..." }] },
    new Date(),
    1500,
  );
  expect({ name: a.name, status: a.status, count: a.count }).toEqual({ name: "AppDown", status: "firing", count: 2 });
  expect(readSlackAlert({ attachments: [{ title: "[RESOLVED] AppDown" }] }, new Date(), 0).status).toBe("resolved");
  expect(() => readSlackAlert({ text: "hi" }, new Date(), 0)).toThrow(/attachments/);
  expect(() => readSlackAlert({ attachments: [{ title: "AppDown" }] }, new Date(), 0)).toThrow(/attachments\.0\.title/);
});
