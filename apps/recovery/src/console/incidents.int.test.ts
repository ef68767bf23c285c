// The console's incidents against real NATS and Postgres: a viewer reads the list and one incident
// (JSON and pages), the main page carries the panel and its script under the console's CSP, a bad
// id or limit is a 400 naming the field, nothing is served without a token.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { natsEnv } from "@pipeline/devstack";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { createLogger } from "@pipeline/shared/log";
import { ensureStreams } from "@pipeline/shared/nats";
import { loadConfig } from "../config.ts";
import { openContext } from "../context.ts";
import type { Incident } from "../incidents/model.ts";
import { recordDrill } from "../incidents/record.ts";
import { type ConsoleServer, startConsole } from "./server.ts";

const region = "consinc";
const VIEWER = `view-${crypto.randomUUID()}`;
let nats: TestNats;
let tdb: TestDatabase;
let ctx: Awaited<ReturnType<typeof openContext>>;
let server: ConsoleServer;
let base: string;
const log = createLogger("console-incidents-test", { level: "silent" });
const T = Date.parse("2026-12-06T10:00:00.000Z");

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats({ regions: [region] }), createTestDatabase("console_incidents")]);
  const config = loadConfig({
    NATS_URL: nats.url,
    ...natsEnv(nats, "recovery"),
    DATABASE_URL: tdb.url,
    REGION: region,
    SNAPSHOT_DIR: mkdtempSync(join(tmpdir(), "console-incidents-")),
    PROVIDER_URL: "http://127.0.0.1:9",
    CONSOLE_PORT: "0",
    CONSOLE_TOKENS: `watcher:viewer:${VIEWER}`,
  });
  ctx = await openContext(config, log, "console-incidents-test");
  await ensureStreams(ctx.jsm, { region });
  server = (await startConsole(config, ctx, log))!;
  base = `http://127.0.0.1:${new URL(server.url).port}`;
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await ctx?.close();
  await nats?.dispose();
  await tdb?.drop();
});

const get = (path: string, token: string | null = VIEWER) =>
  fetch(`${base}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {}, redirect: "manual" });

test("a viewer lists incidents and reads one, as JSON and as a page with its figures and timeline", async () => {
  const { incident } = await recordDrill(ctx.database.sql, {
    scenario: "worker-crash",
    runId: "worker-crash-c0ffee01",
    region,
    faultAt: T,
    remedyMs: 300,
    rtoMs: 7400,
    catchUpMs: 5000,
    rpo: 0,
    acknowledged: 88,
    passed: true,
    steps: [{ atMs: 300, what: "remedy applied" }],
    money: { extraCharges: 1, extraMicros: 1450, totalMicros: 127_600 },
  });
  const list = (await (await get("/console/api/incidents")).json()) as { incidents: Incident[] };
  expect(list.incidents.map((i) => i.id)).toContain(incident.id);
  const one = await get(`/console/api/incidents/${incident.id}`);
  expect(one.status).toBe(200);
  expect(await one.json()).toMatchObject({ kind: "drill", mttrMs: 7400, rpo: 0, rtoMs: 7400, extraMicros: 1450 });

  const page = await get(`/console/incidents/${incident.id}`);
  expect(page.status).toBe(200);
  expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
  const html = await page.text();
  expect(html).toContain(`data-figure="incident.MTTR-start-to-end">7.4 s<`);
  expect(html).toContain(`data-figure="incident.tasks-affected">88<`);
  expect(html).toContain("remedy applied");
  expect(html).not.toContain("<script>");

  // The main page carries the panel and its script (served from the console itself); its rows name the incident.
  const main = await (await get("/console")).text();
  expect(main).toContain(`<section id="incidents"`);
  expect(main).toContain(`<script src="/console/incidents.js" defer></script>`);
  const js = await get("/console/incidents.js");
  expect(js.headers.get("content-type")).toContain("javascript");
  const rows = await (await get("/console/incident-rows")).text();
  expect(rows).toContain(`data-figure="incident.${incident.id}.mttr">7.4 s<`);
  expect(rows).toContain(`data-figure="incident.${incident.id}.state">closed<`);
});

test("a bad id or limit is a 400 naming it; an unknown id a 404; no token, no incidents", async () => {
  const bad = await get("/console/api/incidents/abc");
  expect(bad.status).toBe(400);
  expect(((await bad.json()) as { error: string }).error).toContain("id:");
  const limit = await get("/console/api/incidents?limit=0");
  expect(limit.status).toBe(400);
  expect(((await limit.json()) as { error: string }).error).toContain("limit:");
  const unknownField = await get("/console/api/incidents?kind=drill");
  expect(unknownField.status).toBe(400);
  expect((await get("/console/api/incidents/999999")).status).toBe(404);
  expect((await get("/console/incidents/999999")).status).toBe(404);
  expect((await get("/console/api/incidents", null)).status).toBe(401);
  expect((await get("/console/incidents", null)).status).toBe(302);
  expect((await get("/console/api/incidents", "not-a-token")).status).toBe(401);
});
