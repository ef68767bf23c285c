// Alerts reach a person: Debian's real Prometheus and Alertmanager (unpacked into .data/tools, as the
// monitoring host runs them) scrape a running pipeline (gateway and solver processes) and a
// nats-server through @pipeline/nats-exporter, with the production rules (infra/prometheus/alerts.yml)
// and the configs rendered by infra/monitoring; every alert goes to one Slack-format webhook. The
// solver is killed -9 and the NATS server too, and a task is submitted: AppDown, NatsDown and
// TasksNotCompleting must arrive at the webhook, in Slack's JSON, within 2 minutes; a restarted
// solver solves the task and both of its alerts resolve. Only the scrape and
// evaluation intervals (2 s) and Alertmanager's grouping waits are shorter than production's;
// the rules' `for:` is production's (1 min).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findNatsServer, freePort, natsServerConfig, waitForPort } from "@pipeline/devstack";
import { type RunningExporter, scrapeMonitor, startExporter } from "@pipeline/nats-exporter";
import type { CredentialsFile } from "@pipeline/shared/dev-stack-file";
import { NATS_ROLES } from "@pipeline/shared/nats";
import { type AlertReceiver, describeReceived, startAlertReceiver } from "../infra/monitoring/alert-receiver.ts";
import { renderAlertmanagerConfig } from "../infra/monitoring/alertmanager-config.ts";
import { renderPrometheusConfig } from "../infra/monitoring/prometheus-config.ts";
import { startAlertmanager, startPrometheus, type ToolProcess } from "../infra/monitoring/prometheus-tools.ts";
import { ALERTS_FILE } from "../infra/monitoring/render.ts";
import { api, type Stack, startStack } from "./harness.ts";

const dir = mkdtempSync(join(tmpdir(), "alerts-delivery-"));
const log = (m: string) => console.log(`[alerts-delivery] ${m}`);
let stack: Stack;
let nats: ChildProcess;
let exporter: RunningExporter;
let receiver: AlertReceiver;
let prometheus: ToolProcess;
let alertmanager: ToolProcess;
let solverPort = 0;

/** A nats-server with its monitoring port on (`-m`, production's `http:`), as a NATS host runs it. */
async function startMonitoredNats(): Promise<{ monitorPort: number }> {
  const creds = Object.fromEntries(
    [...NATS_ROLES, "system", "leaf"].map((r) => [r, { user: r, password: randomBytes(12).toString("base64url") }]),
  ) as CredentialsFile;
  const [port, monitorPort] = await Promise.all([freePort(), freePort()]);
  const conf = join(dir, "nats.conf");
  writeFileSync(
    conf,
    natsServerConfig({ port, storeDir: join(dir, "js"), name: "local-nats-1", regions: ["e2e"], creds }),
  );
  const out = openSync(join(dir, "nats.log"), "a");
  nats = spawn(findNatsServer(log).bin, ["-c", conf, "-m", String(monitorPort)], { stdio: ["ignore", out, out] });
  await waitForPort(monitorPort, 15_000);
  return { monitorPort };
}

async function query(q: string): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>> {
  const r = await fetch(`${prometheus.url}/api/v1/query?query=${encodeURIComponent(q)}`);
  return ((await r.json()) as { data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> } })
    .data.result;
}

beforeAll(async () => {
  solverPort = await freePort();
  const [{ monitorPort }, st] = await Promise.all([
    startMonitoredNats(),
    startStack({ solverEnv: { METRICS_PORT: String(solverPort) } }),
  ]);
  stack = st;
  exporter = startExporter({
    host: "127.0.0.1",
    port: 0,
    monitorUrls: [`http://127.0.0.1:${monitorPort}`],
    scrape: (base) => scrapeMonitor(base, { timeoutMs: 1000 }),
    log: { warn() {}, info() {} },
  });
  receiver = startAlertReceiver({ onAlert: (a) => log(describeReceived(a)) });
  const [promPort, amPort] = await Promise.all([freePort(), freePort()]);
  // The production renderers, over an inventory of this machine: one app host, one NATS host.
  const inventory = {
    hosts: [
      { name: "local-app-1", region: "e2e", roles: ["app"], privateIp: "127.0.0.1" },
      { name: "local-nats-1", region: "e2e", roles: ["nats"], privateIp: "127.0.0.1" },
    ],
  };
  writeFileSync(
    join(dir, "prometheus.yml"),
    renderPrometheusConfig(inventory, {
      only: ["gateway", "solver", "nats"],
      ports: { gateway: Number(new URL(stack.gatewayMetricsUrl).port), natsMonitor: monitorPort },
      solverPorts: [solverPort],
      natsExporter: `127.0.0.1:${exporter.port}`,
      alertmanager: `127.0.0.1:${amPort}`,
      rulesFile: "alerts.yml",
      scrapeInterval: "2s",
      evaluationInterval: "2s",
    }),
  );
  copyFileSync(ALERTS_FILE, join(dir, "alerts.yml"));
  writeFileSync(
    join(dir, "alertmanager.yml"),
    renderAlertmanagerConfig({ webhookUrl: receiver.url, groupWait: "1s", groupInterval: "2s" }),
  );
  [alertmanager, prometheus] = await Promise.all([
    startAlertmanager({ configFile: join(dir, "alertmanager.yml"), dataDir: join(dir, "am"), port: amPort, log }),
    startPrometheus({ configFile: join(dir, "prometheus.yml"), dataDir: join(dir, "prom"), port: promPort, log }),
  ]);
}, 180_000);

afterAll(async () => {
  await Promise.allSettled([prometheus?.stop(), alertmanager?.stop(), exporter?.stop(), receiver?.stop()]);
  nats?.kill("SIGKILL");
  await stack?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("killed solver and NATS server, a task waiting: AppDown, NatsDown and TasksNotCompleting reach the webhook in Slack's JSON within 2 min; a restarted solver resolves them", async () => {
  // Every target scraped and up, NATS answering through the exporter, nothing firing yet.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const up = await query("up");
    const natsUp = await query("nats_up");
    if (up.length === 3 && up.every((s) => s.value[1] === "1") && natsUp[0]?.value[1] === "1") break;
    if (Date.now() > deadline)
      throw new Error(`targets not up: ${JSON.stringify(up.map((s) => [s.metric.job, s.value[1]]))}`);
    await Bun.sleep(500);
  }
  expect((await query("up")).map((s) => `${s.metric.job} ${s.metric.host} ${s.metric.region}`).sort()).toEqual([
    "gateway local-app-1 e2e",
    "nats local-nats-1 e2e",
    "solver local-app-1 e2e",
  ]);
  expect(receiver.alerts.filter((a) => a.name === "AppDown" || a.name === "NatsDown")).toEqual([]);

  receiver.mark();
  const killedAt = performance.now();
  await Promise.all([
    stack.solvers[0]!.kill("SIGKILL"),
    new Promise((r) => (nats.once("exit", r), nats.kill("SIGKILL"))),
  ]);
  // A task accepted while no solver runs: it waits, and none completes.
  const submitted = await api<{ id: string }>(stack, "/v1/tasks", {
    method: "POST",
    body: { type: "turnstile", params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/alerts" } },
    headers: { "idempotency-key": "alerts-delivery-1" },
  });
  expect(submitted.status).toBe(202);
  const [appDown, natsDown, stuck] = await Promise.all([
    receiver.waitFor("AppDown", { timeoutMs: 150_000 }),
    receiver.waitFor("NatsDown", { timeoutMs: 150_000 }),
    receiver.waitFor("TasksNotCompleting", { timeoutMs: 150_000 }),
  ]);
  expect(stuck.text).toContain("1 tasks wait in e2e and none completed");
  for (const a of [appDown, natsDown, stuck]) {
    const s = a.afterMs / 1000;
    console.log(
      `alert ${a.name} after ${s.toFixed(1)} s (solver and nats-server killed -9, then a task submitted, at 0 s; for: 1m)`,
    );
    // Not before the rule's `for:`, and within the 2 minutes a drill allows.
    expect(s).toBeGreaterThanOrEqual(60);
    expect(s).toBeLessThan(120);
  }
  // Slack's incoming-webhook JSON, as Slack and Mattermost take it.
  expect(appDown.body.username).toBe("captcha-pipeline alerts");
  expect(appDown.body.attachments[0]!.title).toBe("[FIRING:1] AppDown");
  expect(appDown.text).toContain(`solver on local-app-1 (127.0.0.1:${solverPort}) has not answered /metrics for 1 min`);
  expect(appDown.text).toContain("(page; host local-app-1,");
  expect(natsDown.body.attachments[0]!.title).toBe("[FIRING:1] NatsDown");
  expect(natsDown.text).toContain("nats-server 127.0.0.1:");
  // The gateway still answers: no AppDown names it.
  expect(receiver.alerts.some((a) => a.name === "AppDown" && a.text.includes("gateway on"))).toBe(false);

  // A solver back on the same port: it solves the task, and the webhook hears both alerts resolved.
  receiver.mark();
  stack.spawnSolver({ METRICS_PORT: String(solverPort) });
  const [resolved, unstuck] = await Promise.all([
    receiver.waitFor("AppDown", { status: "resolved", timeoutMs: 60_000 }),
    receiver.waitFor("TasksNotCompleting", { status: "resolved", timeoutMs: 60_000 }),
  ]);
  expect(resolved.body.attachments[0]!.title).toBe("[RESOLVED] AppDown");
  for (const r of [resolved, unstuck])
    console.log(`resolved ${r.name} after ${(r.afterMs / 1000).toFixed(1)} s (solver restarted at 0 s)`);
  log(`total ${((performance.now() - killedAt) / 1000).toFixed(1)} s`);
}, 300_000);
