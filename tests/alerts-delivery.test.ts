// Alerts reach a person: Debian's real Prometheus and Alertmanager (unpacked into .data/tools, as the
// monitoring host runs them) scrape a running pipeline (gateway and solver processes), a
// nats-server through @pipeline/nats-exporter, a Postgres through Debian's postgres exporter and
// Debian's node exporter, with the production rules (infra/prometheus/alerts.yml)
// and the configs rendered by infra/monitoring; every alert goes to one Slack-format webhook. The
// solver and the NATS server are killed -9, a Postgres stopped (immediate), a host's node exporter
// stopped, and a task submitted: AppDown, NatsDown, PostgresDown, HostDown and TasksNotCompleting
// must arrive at the webhook, in Slack's JSON, within 2 minutes; a restarted solver solves the
// task and both of its alerts resolve. Only the scrape and
// evaluation intervals (2 s) and Alertmanager's grouping waits are shorter than production's;
// the rules' `for:` is production's (1 min).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  findNatsServer,
  freePort,
  natsServerConfig,
  type PostgresHandle,
  startPostgres,
  waitForPort,
} from "@pipeline/devstack";
import { type RunningExporter, scrapeMonitor, startExporter } from "@pipeline/nats-exporter";
import type { CredentialsFile } from "@pipeline/shared/dev-stack-file";
import { NATS_ROLES } from "@pipeline/shared/nats";
import {
  type AlertReceiver,
  describeReceived,
  type ReceivedAlert,
  startAlertReceiver,
} from "../infra/monitoring/alert-receiver.ts";
import { renderAlertmanagerConfig } from "../infra/monitoring/alertmanager-config.ts";
import { renderPrometheusConfig } from "../infra/monitoring/prometheus-config.ts";
import {
  startAlertmanager,
  startNodeExporter,
  startPostgresExporter,
  startPrometheus,
  type ToolProcess,
} from "../infra/monitoring/prometheus-tools.ts";
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
let nodeExporter: ToolProcess;
let pgExporter: ToolProcess;
let pg: PostgresHandle;
const pgDir = mkdtempSync(join(tmpdir(), "alerts-delivery-pg-"));
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
  // A Postgres of the test's own (it is stopped) with Debian's exporter, and Debian's node exporter
  // standing for a host of its own.
  const [promPort, amPort, pgPort, pgExporterPort, nodePort] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    freePort(),
    freePort(),
  ]);
  pg = await startPostgres({ dataDir: pgDir, port: pgPort, fast: true, log });
  [pgExporter, nodeExporter] = await Promise.all([
    startPostgresExporter({
      dataDir: join(dir, "pg-exporter"),
      port: pgExporterPort,
      url: `${pg.adminUrl}${pg.adminUrl.includes("?") ? "&" : "?"}sslmode=disable`,
      log,
    }),
    startNodeExporter({ dataDir: join(dir, "node-exporter"), port: nodePort, log }),
  ]);
  // The production renderers, over an inventory of this machine: an app host, a NATS host, a
  // Postgres host and a spare host; every one is 127.0.0.1, so only the spare host keeps its node
  // exporter target (a HostDown of the others would hold back the alerts this test waits for).
  const inventory = {
    hosts: [
      { name: "local-app-1", region: "e2e", roles: ["app"], privateIp: "127.0.0.1" },
      { name: "local-nats-1", region: "e2e", roles: ["nats"], privateIp: "127.0.0.1" },
      { name: "local-pg-1", region: "e2e", roles: ["postgres"], privateIp: "127.0.0.1" },
      { name: "local-spare-1", region: "e2e", roles: ["spare"], privateIp: "127.0.0.1" },
    ],
  };
  const config = Bun.YAML.parse(
    renderPrometheusConfig(inventory, {
      only: ["gateway", "solver", "nats", "node", "postgres"],
      ports: {
        gateway: Number(new URL(stack.gatewayMetricsUrl).port),
        natsMonitor: monitorPort,
        postgres: pgExporterPort,
        node: nodePort,
      },
      solverPorts: [solverPort],
      natsExporter: `127.0.0.1:${exporter.port}`,
      alertmanager: `127.0.0.1:${amPort}`,
      rulesFile: "alerts.yml",
      scrapeInterval: "2s",
      evaluationInterval: "2s",
    }),
  ) as { scrape_configs: Array<{ job_name: string; static_configs: Array<{ labels: { host: string } }> }> };
  const node = config.scrape_configs.find((j) => j.job_name === "node")!;
  node.static_configs = node.static_configs.filter((t) => t.labels.host === "local-spare-1");
  writeFileSync(join(dir, "prometheus.yml"), Bun.YAML.stringify(config, null, 2));
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
  await Promise.allSettled([
    prometheus?.stop(),
    alertmanager?.stop(),
    exporter?.stop(),
    receiver?.stop(),
    nodeExporter?.stop(),
    pgExporter?.stop(),
    pg?.stop("immediate"),
  ]);
  rmSync(pgDir, { recursive: true, force: true });
  nats?.kill("SIGKILL");
  await stack?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("solver, NATS, Postgres and a host down, a task waiting: each alert reaches the webhook in Slack's JSON within 2 min; a restarted solver resolves its two", async () => {
  // Every target scraped and up, NATS answering through the exporter, nothing firing yet.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const up = await query("up");
    const natsUp = await query("nats_up");
    const pgUp = await query("pg_up");
    const ready = up.length === 5 && up.every((s) => s.value[1] === "1");
    if (ready && natsUp[0]?.value[1] === "1" && pgUp[0]?.value[1] === "1") break;
    if (Date.now() > deadline)
      throw new Error(`targets not up: ${JSON.stringify(up.map((s) => [s.metric.job, s.value[1]]))}`);
    await Bun.sleep(500);
  }
  expect((await query("up")).map((s) => `${s.metric.job} ${s.metric.host} ${s.metric.region}`).sort()).toEqual([
    "gateway local-app-1 e2e",
    "nats local-nats-1 e2e",
    "node local-spare-1 e2e",
    "postgres local-pg-1 e2e",
    "solver local-app-1 e2e",
  ]);
  expect(receiver.alerts.filter((a) => a.name === "AppDown" || a.name === "NatsDown")).toEqual([]);

  receiver.mark();
  const killedAt = performance.now();
  await Promise.all([
    stack.solvers[0]!.kill("SIGKILL"),
    new Promise((r) => (nats.once("exit", r), nats.kill("SIGKILL"))),
    nodeExporter.stop(),
    pg.stop("immediate"),
  ]);
  // A task accepted while no solver runs: it waits, and none completes.
  const submitted = await api<{ id: string }>(stack, "/v1/tasks", {
    method: "POST",
    body: { type: "turnstile", params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/alerts" } },
    headers: { "idempotency-key": "alerts-delivery-1" },
  });
  expect(submitted.status).toBe(202);
  type Five = [ReceivedAlert, ReceivedAlert, ReceivedAlert, ReceivedAlert, ReceivedAlert];
  const [appDown, natsDown, stuck, hostDown, pgDown] = (await Promise.all(
    ["AppDown", "NatsDown", "TasksNotCompleting", "HostDown", "PostgresDown"].map((n) =>
      receiver.waitFor(n, { timeoutMs: 150_000 }),
    ),
  ).catch(async (err) => {
    const show = async (q: string) => JSON.stringify((await query(q)).map((r) => [r.metric, r.value[1]]));
    throw new Error(
      `${(err as Error).message}\nALERTS ${await show("ALERTS")}\nup ${await show("up")}\npg_up ${await show("pg_up")}`,
    );
  })) as Five;
  expect(stuck.text).toContain("1 tasks wait in e2e and none completed");
  expect(hostDown.text).toContain("Host local-spare-1 (127.0.0.1:");
  expect(pgDown.text).toContain("Postgres on local-pg-1 refuses its exporter");
  for (const a of [appDown, natsDown, stuck, hostDown, pgDown]) {
    const s = a.afterMs / 1000;
    console.log(`alert ${a.name} after ${s.toFixed(1)} s (every fault at 0 s; for: 1m)`);
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
