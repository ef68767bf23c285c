// Every app exposes Prometheus metrics that `promtool check metrics` accepts, with the series an
// operator needs; logs carry a request or task id and never a key or token.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { findPromtool } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import type { TaskView } from "@pipeline/shared/schemas";
import { api, PROVIDER_KEY, ROOT, type Stack, startStack } from "./harness.ts";

let s: Stack;
let promtool: string;
let exposed = "";
beforeAll(async () => {
  promtool = findPromtool((m) => console.error(`[observability] ${m}`));
  s = await startStack({ region: "obs", emulator: { latencyMs: 20 } });
});
afterAll(() => s.stop());

/** The value of the first sample of `name` whose labels include `labels` (any order), or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

function check(exposition: string) {
  const r = spawnSync(promtool, ["check", "metrics"], { input: exposition, encoding: "utf8" });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

test("gateway and solver /metrics pass promtool and carry the pipeline's series", async () => {
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await api<{ id: string }>(s, "/v1/tasks", {
      method: "POST",
      body: {
        type: "turnstile",
        params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/obs/${i}` },
      },
    });
    ids.push(r.body.id);
  }
  for (const id of ids) expect((await api<TaskView>(s, `/v1/tasks/${id}?wait=20`)).body.status).toBe("completed");
  await api(s, "/v1/tasks", { method: "POST", body: { type: "nope" } });

  // Only on the metrics listener (issue 14.7): the clients' port has no /metrics.
  expect((await fetch(`${s.gatewayUrl}/metrics`)).status).toBe(404);
  const gateway = await (await fetch(`${s.gatewayMetricsUrl}/metrics`)).text();
  const gw = check(gateway);
  expect(gw.out).toBe("");
  expect(gw.code).toBe(0);
  expect(sample(gateway, "pipeline_tasks", { state: "completed", type: "turnstile" })).toBe(5);
  expect(
    sample(gateway, "gateway_http_request_duration_seconds_count", {
      method: "POST",
      route: "/v1/tasks",
      status: "202",
    }),
  ).toBe(5);
  expect(
    sample(gateway, "gateway_http_request_duration_seconds_count", {
      method: "POST",
      route: "/v1/tasks",
      status: "400",
    }),
  ).toBe(1);
  expect(sample(gateway, "gateway_tasks_submitted_total", { type: "turnstile", result: "accepted" })).toBe(5);

  const started = await eventually(() => /"metrics":"(http:\/\/[^"]+)"/.exec(s.solvers[0]!.log())?.[1]);
  const solver = await (await fetch(started)).text();
  const sv = check(solver);
  expect(sv.out).toBe("");
  expect(sv.code).toBe(0);
  expect(sample(solver, "solver_outcomes_total", { kind: "ack" })).toBe(5);
  expect(sample(solver, "solver_provider_replies_total", { call: "submit", kind: "ok" })).toBe(5);
  expect(sample(solver, "solver_solve_duration_seconds_count", { type: "turnstile" })).toBe(5);
  expect(sample(solver, "solver_breaker_state")).toBe(0);
  expect(sample(solver, "solver_waiting")).toBe(0);
  expect(sample(solver, "solver_gc_collections_total")).toBeGreaterThanOrEqual(0);
  expect(sample(solver, "pipeline_provider_tasks_in_flight")).toBe(0);
  expect(sample(solver, "pipeline_consumer_pending", { lane: "normal" })).toBe(0);
  expect(sample(solver, "pipeline_dlq_messages")).toBe(0);
  expect(sample(solver, "solver_webhook_deliveries_total", { outcome: "refused" })).toBe(0);
  expect(sample(solver, "pipeline_webhook_deliveries_pending")).toBe(0);
  expect(sample(solver, "pipeline_webhook_delivery_lag_seconds")).toBe(0);
  expect(sample(solver, "process_resident_memory_bytes")).toBeGreaterThan(0);
  exposed = `${gateway}\n${solver}`;
}, 60_000);

test("log lines are JSON with a request or task id, and never carry a key or token", async () => {
  const lines = s
    .logs()
    .split("\n")
    .filter((l) => l.startsWith("{"));
  const requests = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === "request");
  expect(requests.length).toBeGreaterThan(5);
  expect(requests.every((l) => typeof l.requestId === "string" && typeof l.route === "string")).toBe(true);
  const all = lines.join("\n");
  expect(all).not.toContain(s.apiKey);
  expect(all).not.toContain(PROVIDER_KEY);
  const tokens = await s.db.sql<{ token: string }[]>`select token from tasks where token is not null`;
  for (const t of tokens) expect(all).not.toContain(t.token);
});

test("the Prometheus config and alert rules load, and the dashboard only queries series the apps expose", async () => {
  const cfg = spawnSync(promtool, ["check", "config", join(ROOT, "infra/prometheus/prometheus.yml")], {
    encoding: "utf8",
  });
  expect(cfg.status).toBe(0);
  const dashboard = JSON.parse(readFileSync(join(ROOT, "infra/grafana/pipeline.json"), "utf8")) as {
    panels: Array<{ targets: Array<{ expr: string }> }>;
  };
  const names = new Set(
    dashboard.panels.flatMap((p) =>
      p.targets.flatMap((t) =>
        [...t.expr.matchAll(/\b((?:pipeline|solver|gateway|process)_[a-z_]+)/g)].map((m) => m[1]!),
      ),
    ),
  );
  expect(names.size).toBeGreaterThan(8);
  expect(exposed.length).toBeGreaterThan(0);
  for (const name of names) expect(exposed).toContain(`# TYPE ${name.replace(/_(bucket|count|sum)$/, "")} `);
});
