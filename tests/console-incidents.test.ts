// Incidents on the console, in a real browser (Debian's chromium driven by playwright-core, set up
// as tests/console.test.ts does): the recovery service as a process against real NATS and Postgres; a rollout record reaching rolledBack in `rollout_control`
// is picked up by the service's detector, shown open in the Incidents panel of a viewer's page, then
// closed with its MTTR once the record says the shards are back; its page shows the timeline. No
// console script is refused by the page's CSP.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kvm } from "@nats-io/kv";
import { freePort, natsEnv, waitForPort } from "@pipeline/devstack";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import type { Browser } from "playwright-core";
import { type Proc, spawnApp } from "./harness.ts";
import { launchChromium } from "./support/console-browser.ts";

const region = "incwatch";
const VIEWER = `view-${crypto.randomUUID()}`;
let nats: TestNats;
let tdb: TestDatabase;
let admin: NatsConnection;
let recovery: Proc;
let browser: Browser;
let base: string;

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats({ regions: [region] }), createTestDatabase("console_incidents_e2e")]);
  admin = await connectNats(nats.url, "console-incidents-admin", nats.auth("admin"));
  // The rollout service's bucket (its own region's); the recovery service only opens it.
  await new Kvm(admin).create("rollout_control", { history: 64 });
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "console-incidents-"));
  const env = {
    NATS_URL: nats.url,
    ...natsEnv(nats, "recovery"),
    DATABASE_URL: tdb.url,
    REGION: region,
    SNAPSHOT_DIR: join(dir, "snapshots"),
    SNAPSHOT_INTERVAL_MS: "0",
    PROVIDER_URL: "http://127.0.0.1:9",
    CONSOLE_PORT: String(port),
    CONSOLE_TOKENS: `watcher:viewer:${VIEWER}`,
    LOG_LEVEL: "info",
  };
  recovery = spawnApp("recovery", "apps/recovery/src/main.ts", env, dir);
  console.error(`[console-incidents] recovery log in ${dir}/recovery.log`);
  await waitForPort(port, 30_000);
  base = `http://127.0.0.1:${port}`;
  browser = await launchChromium("console-incidents");
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await recovery?.kill("SIGTERM");
  await admin?.close();
  await nats?.dispose();
  await tdb?.drop();
});

const T0 = Date.now() - 90_000;
const at = (s: number) => new Date(T0 + s * 1000).toISOString();
const record = (log: unknown[]) =>
  JSON.stringify({
    id: "v9-20261206120000",
    plan: { version: "v9", stable: "v8", regions: [region], steps: [5, 100], bakeMs: 1000, gate: {} },
    state: "rolledBack",
    reason: `gate failed in ${region} at 5%: task failure rate 30.0% vs stable 0.0%`,
    region: 0,
    step: 0,
    stepStartedAt: 0,
    applied: false,
    log,
  });
const moved = { at: at(0), action: "applied", why: `${region}: 1 shard(s) to v9` };
const decision = {
  at: at(45),
  action: "rollback",
  region,
  why: `gate failed in ${region} at 5%: task failure rate 30.0% vs stable 0.0%`,
  figures: { canary: { tasks: 30, extraPaid: 0 } },
};

test("a rolled back rollout appears in a viewer's Incidents panel, open, then closed with its MTTR; its page has the timeline", async () => {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await ctx.newPage();
  const refused: string[] = [];
  page.on("console", (m) => {
    if (/Content Security Policy/i.test(m.text())) refused.push(m.text());
  });
  await page.goto(`${base}/console/login`);
  await page.getByLabel("Operator token").fill(VIEWER);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${base}/console`);
  await expect(page.locator("#incidents-out").textContent()).resolves.toContain("no incident recorded");

  const control = await new Kvm(admin).open("rollout_control");
  await control.put("current", record([moved, decision]));
  // The service's detector (every 5 s) opens it; the panel refreshes every 10 s.
  const row = page.locator("#incidents-table tr[data-incident]").first();
  await row.waitFor({ timeout: 30_000 });
  const id = await row.getAttribute("data-incident");
  await expect(page.locator(`[data-figure="incident.${id}.state"]`).textContent()).resolves.toBe("open");
  await expect(page.locator(`[data-figure="incident.${id}.kind"]`).textContent()).resolves.toBe("rollback");

  await control.put("current", record([moved, decision, { at: at(47.5), action: "applied", why: "back on v8" }]));
  const closed = page.locator(`[data-figure="incident.${id}.state"]`, { hasText: "closed" });
  await closed.waitFor({ timeout: 30_000 });
  await expect(page.locator(`[data-figure="incident.${id}.mttr"]`).textContent()).resolves.toBe("47.5 s");

  await page.locator(`#incidents-table a[href="/console/incidents/${id}"]`).click();
  await page.waitForURL(`${base}/console/incidents/${id}`);
  await expect(page.locator('[data-figure="incident.MTTR-start-to-end"]').textContent()).resolves.toBe("47.5 s");
  await expect(page.locator('[data-figure="incident.tasks-affected"]').textContent()).resolves.toBe("30");
  const timeline = await page.locator("#incident-timeline").textContent();
  expect(timeline).toContain("rollback");
  expect(timeline).toContain("back on v8");
  expect(refused).toEqual([]);
  await ctx.close();
}, 90_000);
