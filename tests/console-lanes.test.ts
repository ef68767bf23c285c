// The console's Lanes panel in a real browser (Debian's chromium through playwright-core, set up as
// tests/console.test.ts does) against a running stack and the recovery service: an operator pauses
// the normal lane from the page (confirmed), sees "paused by ops", a task of the lane waits queued,
// then resumes it and the task completes; a viewer sees the lanes without the buttons and is
// refused by the API; a request without the action header, or with a bad body, changes nothing.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@pipeline/devstack/testing";
import type { Browser, Page } from "playwright-core";
import { api, type Proc, type Stack, startStack } from "./harness.ts";
import { launchChromium, signInAs, spawnConsole } from "./support/console-browser.ts";

const region = "conslanes";
const OPERATOR = `op-${crypto.randomUUID()}`;
const VIEWER = `view-${crypto.randomUUID()}`;
const out = mkdtempSync(join(tmpdir(), "console-lanes-test-"));
let s: Stack;
let recovery: Proc;
let base: string;
let browser: Browser;

beforeAll(async () => {
  s = await startStack({ region, solvers: 1, emulator: { latencyMs: 200 } });
  ({ recovery, base } = await spawnConsole(s, {
    region,
    tokens: `ops:operator:${OPERATOR},watcher:viewer:${VIEWER}`,
    out,
  }));
  browser = await launchChromium("console-lanes");
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await recovery?.kill("SIGTERM");
  await s?.stop();
});

async function signIn(token: string): Promise<Page> {
  return (await signInAs(browser, base, token)).page;
}

const figure = (page: Page, name: string) => page.locator(`[data-figure="${name}"]`).first().textContent();
const stateOf = async (id: string) =>
  (await s.db.sql<{ state: string }[]>`select state from tasks where id = ${id}`)[0]?.state;

test("an operator pauses the normal lane from the page, sees who paused it, a normal task waits; resumed, it completes", async () => {
  const page = await signIn(OPERATOR);
  const dialogs: string[] = [];
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    void d.accept();
  });
  await eventually(async () => (await figure(page, "lane.normal.state")) === "running", 15_000);
  await page.getByLabel("Reason for pausing lane normal").fill("provider incident");
  await page.getByRole("button", { name: "Pause lane normal" }).click();
  await eventually(async () => (await figure(page, "lane.normal.state")) === "paused", 10_000);
  expect(dialogs[0]).toMatch(/^Pause lane normal until resumed\?/);
  const who = (await figure(page, "lane.normal.who"))!;
  expect(who).toContain("paused by ops");
  expect(who).toContain("provider incident");
  expect(await figure(page, "lane.high.state")).toBe("running");
  await page.screenshot({ path: join(out, "lanes-paused.png"), fullPage: true });

  const r = await api<{ id: string }>(s, "/v1/tasks", {
    method: "POST",
    body: {
      type: "turnstile",
      priority: "normal",
      params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/lanes" },
    },
  });
  expect(r.status).toBe(202);
  await Bun.sleep(3000);
  expect(await stateOf(r.body.id)).toBe("queued");

  await page.getByRole("button", { name: "Resume lane normal" }).click();
  await eventually(async () => (await figure(page, "lane.normal.state")) === "running", 10_000);
  expect(dialogs[1]).toMatch(/^Resume lane normal\?/);
  expect(await figure(page, "lane.normal.who")).toContain("resumed by ops");
  await eventually(async () => (await stateOf(r.body.id)) === "completed", 30_000);
  const audit = await s.db.sql<{ action: string; actor: string; detail: { reason: string | null } }[]>`
    select action, actor, detail from audit_log where action like 'lane.%' order by id`;
  expect(audit.map((a) => [a.action, a.actor])).toEqual([
    ["lane.pause", "console:ops"],
    ["lane.resume", "console:ops"],
  ]);
  expect(audit[0]!.detail.reason).toBe("provider incident");
  console.error(`[console-lanes] screenshot ${join(out, "lanes-paused.png")}`);
}, 120_000);

test("a viewer sees the lanes without buttons and is refused; a missing action header or a bad body changes nothing", async () => {
  const page = await signIn(VIEWER);
  await eventually(async () => (await figure(page, "lane.low.state")) === "running", 15_000);
  expect(await page.getByRole("button", { name: "Pause lane low" }).count()).toBe(0);
  const post = (token: string, path: string, headers: Record<string, string>, body: string) =>
    fetch(`${base}/console/api/lanes/${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers },
      body,
    });
  const lane = { "x-console-action": "lane" };
  expect((await post(VIEWER, "low/pause", lane, "{}")).status).toBe(403);
  expect((await post(OPERATOR, "low/pause", {}, "{}")).status).toBe(400);
  const bad = await post(OPERATOR, "urgent/pause", lane, JSON.stringify({ for: "9d" }));
  expect(bad.status).toBe(400);
  expect(((await bad.json()) as { fields: string[] }).fields.sort()).toEqual(["for", "lane"]);
  expect((await post(OPERATOR, "low/pause", lane, "{not json")).status).toBe(400);
  expect((await post(OPERATOR, "low/resume", lane, JSON.stringify({ for: "1h" }))).status).toBe(400);
  const lanes = (await (
    await fetch(`${base}/console/api/lanes`, { headers: { authorization: `Bearer ${VIEWER}` } })
  ).json()) as { lanes: { lane: string; state: string }[] };
  expect(lanes.lanes.find((l) => l.lane === "low")?.state).toBe("running");
  const [n] = await s.db.sql<{ n: number }[]>`select count(*)::int as n from audit_log where detail->>'lane' = 'low'`;
  expect(n!.n).toBe(0);
}, 60_000);
