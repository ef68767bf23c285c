import { expect, test } from "bun:test";
import { loadExporterConfig } from "./config.ts";
import type { MonitorSnapshot } from "./nats-metrics.ts";
import { exporterHandler } from "./server.ts";

const quiet = { warn() {}, info() {} };

test("/metrics?target= reads only a configured server; without a target, the one configured", async () => {
  const asked: string[] = [];
  const scrape = async (base: string): Promise<MonitorSnapshot> => {
    asked.push(base);
    return { errors: { varz: "HTTP 500", jsz: "HTTP 500", healthz: "HTTP 500" } };
  };
  const two = exporterHandler({ monitorUrls: ["http://10.0.1.20:8222", "http://10.0.1.21:8222"], scrape, log: quiet });
  const ok = await two(new Request("http://x/metrics?target=10.0.1.21:8222"));
  expect(ok.status).toBe(200);
  expect(ok.headers.get("content-type")).toContain("version=0.0.4");
  expect(await ok.text()).toContain("nats_up 0\n");
  expect((await two(new Request("http://x/metrics?target=http://10.0.1.20:8222"))).status).toBe(200);
  expect((await two(new Request("http://x/metrics?target=169.254.169.254:80"))).status).toBe(400);
  expect((await two(new Request("http://x/metrics"))).status).toBe(400);
  expect(asked).toEqual(["http://10.0.1.21:8222", "http://10.0.1.20:8222"]);
  const one = exporterHandler({ monitorUrls: ["http://127.0.0.1:8222"], scrape, log: quiet });
  expect((await one(new Request("http://x/metrics"))).status).toBe(200);
  expect((await one(new Request("http://x/healthz"))).status).toBe(200);
  expect((await one(new Request("http://x/other"))).status).toBe(404);
});

test("a failing endpoint is logged when its reason changes, not at every scrape", async () => {
  const warned: unknown[] = [];
  let reason = "HTTP 500";
  const h = exporterHandler({
    monitorUrls: ["http://127.0.0.1:8222"],
    scrape: async () => ({ errors: { jsz: reason } }),
    log: { warn: (o: unknown) => void warned.push(o), info() {} },
  });
  for (let i = 0; i < 3; i++) await h(new Request("http://x/metrics"));
  reason = "jsz: streams: Invalid input: expected number, received string";
  await h(new Request("http://x/metrics"));
  expect(warned).toEqual([
    { target: "http://127.0.0.1:8222", endpoint: "jsz", reason: "HTTP 500" },
    {
      target: "http://127.0.0.1:8222",
      endpoint: "jsz",
      reason: "jsz: streams: Invalid input: expected number, received string",
    },
  ]);
});

test("config: defaults, a list of monitoring URLs, and each bad variable named", () => {
  const d = loadExporterConfig({});
  expect(d.NATS_MONITOR_URLS).toEqual(["http://127.0.0.1:8222"]);
  expect(d.NATS_EXPORTER_PORT).toBe(7777);
  expect(
    loadExporterConfig({ NATS_MONITOR_URLS: "http://10.0.1.20:8222/, http://10.0.1.21:8222" }).NATS_MONITOR_URLS,
  ).toEqual(["http://10.0.1.20:8222", "http://10.0.1.21:8222"]);
  expect(() =>
    loadExporterConfig({ NATS_MONITOR_URLS: "http://10.0.1.20:8222/varz", NATS_EXPORTER_PORT: "x" }),
  ).toThrow(/NATS_MONITOR_URLS\.0: each must be http\(s\):\/\/host:port, with no path[\s\S]*NATS_EXPORTER_PORT/);
});
