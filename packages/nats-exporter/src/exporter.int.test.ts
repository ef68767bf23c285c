// The exporter against a real nats-server (the project's, >= 2.14) with its monitoring port on and
// the region's topology provisioned as in production; its output checked by Debian's promtool.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { debianPackages, findNatsServer, freePort, natsServerConfig, waitForPort } from "@pipeline/devstack";
import type { CredentialsFile } from "@pipeline/shared/dev-stack-file";
import { NATS_ROLES } from "@pipeline/shared/nats";
import { provisionRegionsAt } from "@pipeline/shared/provision";
import { scrapeMonitor } from "./scrape.ts";
import { type RunningExporter, startExporter } from "./server.ts";

const dir = mkdtempSync(join(tmpdir(), "nats-exporter-"));
let server: ChildProcess;
let exporter: RunningExporter;
let natsPort = 0;
let monitorPort = 0;
const creds = Object.fromEntries(
  [...NATS_ROLES, "system", "leaf"].map((r) => [r, { user: r, password: randomBytes(12).toString("base64url") }]),
) as CredentialsFile;

beforeAll(async () => {
  const nats = findNatsServer((m) => console.error(`[nats-exporter] ${m}`));
  [natsPort, monitorPort] = await Promise.all([freePort(), freePort()]);
  const conf = join(dir, "nats.conf");
  writeFileSync(
    conf,
    natsServerConfig({ port: natsPort, storeDir: join(dir, "js"), name: "exp-1", regions: ["local"], creds }),
  );
  const log = openSync(join(dir, "nats.log"), "a");
  // `-m`: the monitoring port, as `http:` does in production's config (127.0.0.1 here).
  server = spawn(nats.bin, ["-c", conf, "-m", String(monitorPort)], { stdio: ["ignore", log, log] });
  await waitForPort(natsPort, 15_000);
  await waitForPort(monitorPort, 15_000);
  await provisionRegionsAt(`nats://127.0.0.1:${natsPort}`, { user: creds.admin.user, pass: creds.admin.password }, [
    "local",
  ]);
  exporter = startExporter({
    host: "127.0.0.1",
    port: 0,
    monitorUrls: [`http://127.0.0.1:${monitorPort}`],
    scrape: (base) => scrapeMonitor(base, { timeoutMs: 2000 }),
    log: { warn: (o: object, m: string) => console.error(`[nats-exporter] ${m} ${JSON.stringify(o)}`), info() {} },
  });
}, 60_000);

afterAll(async () => {
  await exporter?.stop();
  server?.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

const metrics = async () => (await fetch(`${exporter.url}/metrics`)).text();

test("a live server: up, healthy, its version, the provisioned streams and consumers; promtool accepts the text", async () => {
  const body = await metrics();
  const lines = body.split("\n");
  expect(lines).toContain("nats_up 1");
  expect(lines).toContain("nats_healthz_ok 1");
  expect(lines).toContain("nats_jetstream_enabled 1");
  for (const e of ["varz", "jsz", "healthz"]) expect(lines).toContain(`nats_exporter_endpoint_up{endpoint="${e}"} 1`);
  expect(body).toMatch(
    /^nats_server_info\{server_name="exp-1",server_id="[A-Z0-9]+",version="2\.\d+\.\d+",cluster="",domain=""\} 1$/m,
  );
  expect(body).toMatch(/^nats_stream_messages\{account="PIPELINE",stream="TASKS_LOCAL"\} 0$/m);
  expect(body).toMatch(/^nats_stream_messages\{account="PIPELINE",stream="EVENTS_LOCAL"\} \d+$/m);
  expect(Number(/^nats_jetstream_streams (\d+)$/m.exec(body)?.[1])).toBeGreaterThanOrEqual(2);
  expect(Number(/^nats_server_connections_total (\d+)$/m.exec(body)?.[1])).toBeGreaterThanOrEqual(1);
  const streams = [
    ...new Set([...body.matchAll(/^nats_stream_messages\{account="PIPELINE",stream="([^"]+)"\}/gm)].map((m) => m[1])),
  ];
  const consumers = [
    ...new Set([...body.matchAll(/^nats_consumer_num_pending\{[^}]*consumer="([^"]+)"\}/gm)].map((m) => m[1])),
  ];
  console.log(
    `[nats-exporter] ${lines.filter((l) => l && !l.startsWith("#")).length} samples; streams ${streams.join(", ")}; consumers ${consumers.join(", ") || "none"}`,
  );
  const promtool = join(
    debianPackages("prometheus", ["prometheus", "prometheus-alertmanager"]).root,
    "usr",
    "bin",
    "promtool",
  );
  const check = spawnSync(promtool, ["check", "metrics"], { input: body, encoding: "utf8" });
  expect({ status: check.status, out: `${check.stdout}${check.stderr}`.trim() }).toEqual({ status: 0, out: "" });
}, 120_000);

test("the server killed: nats_up 0 on the next scrape, the exporter itself still answers", async () => {
  const exited = new Promise((r) => server.once("exit", r));
  server.kill("SIGKILL");
  await exited;
  const body = await metrics();
  expect(body.split("\n")).toContain("nats_up 0");
  expect(body).not.toContain("nats_server_info");
  expect((await fetch(`${exporter.url}/healthz`)).status).toBe(200);
});
