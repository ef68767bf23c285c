// Rollouts steered from the operator console in a real browser (Debian's chromium through
// playwright-core): one region with a v1 and a v2 solver under steady load, the rollout service
// and the recovery service (console) as processes. A rollout with steps 50,pause,100 waits at its
// pause step on the page; Promote (confirmed) takes it to 100 % and promoted. A second rollout is
// aborted with a click and the shards are back on the stable version. A viewer sees no button and
// the API refuses it (403). Both clicks are in audit_log as the CLI's actions, by console:ops.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { natsEnv } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import { connectNats } from "@pipeline/shared/nats";
import { laneConsumer, streams } from "@pipeline/shared/subjects";
import type { Browser, Page } from "playwright-core";
import { api, type Proc, ROOT, type Stack, spawnApp, startStack } from "./harness.ts";
import { launchChromium, signInAs, spawnConsole } from "./support/console-browser.ts";

const region = "crl";
const OPERATOR = `op-${crypto.randomUUID()}`;
const VIEWER = `view-${crypto.randomUUID()}`;
const out = mkdtempSync(join(tmpdir(), "console-rollout-test-"));
let s: Stack;
let recovery: Proc;
let service: Proc;
let base: string;
let browser: Browser;
let loading = true;
let load: Promise<void>;
let rolloutEnv: Record<string, string>;

/** About 10 tasks a second through the gateway until the test ends (the gate needs traffic on both versions). */
async function steady(): Promise<void> {
  for (let i = 0; loading; i++) {
    await api(s, "/v1/tasks", {
      method: "POST",
      body: {
        type: "turnstile",
        params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/cr/${i}` },
      },
    }).catch(() => undefined);
    await Bun.sleep(100);
  }
}

beforeAll(async () => {
  s = await startStack({ region, solvers: 1, emulator: { latencyMs: 200 }, solverEnv: { SOLVER_VERSION: "v1" } });
  const nc = await connectNats(s.nats.url, "console-rollout-test", s.nats.auth("admin"));
  const jsm = await jetstreamManager(nc);
  await eventually(
    async () =>
      (await jsm.consumers.info(streams.tasks(region), laneConsumer(region, "normal", "v1")).catch(() => undefined)) !==
      undefined,
    20_000,
    200,
  );
  await nc.close();
  s.spawnSolver({ SOLVER_VERSION: "v2" });
  rolloutEnv = { NATS_URL: s.nats.url, ...natsEnv(s.nats, "rollout"), REGION: region, DATABASE_URL: s.tdb.url };
  service = spawnApp("rollout", "apps/rollout/src/main.ts", { ...rolloutEnv, ROLLOUT_TICK_MS: "500" }, s.logDir);
  ({ recovery, base } = await spawnConsole(s, {
    region,
    tokens: `ops:operator:${OPERATOR},watcher:viewer:${VIEWER}`,
    out,
  }));
  browser = await launchChromium("console-rollout");
  load = steady();
}, 120_000);

afterAll(async () => {
  loading = false;
  await load;
  await browser?.close();
  await recovery?.kill("SIGTERM");
  await service?.kill("SIGTERM");
  await s?.stop();
});

async function rollout(...args: string[]): Promise<{ code: number; out: string }> {
  const p = Bun.spawn([process.execPath, `${ROOT}/apps/rollout/src/cli.ts`, ...args], {
    env: { ...process.env, ...rolloutEnv, LOG_LEVEL: "warn" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [o, e, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out: o + e };
}

async function signIn(token: string): Promise<Page> {
  return (await signInAs(browser, base, token)).page;
}

const figure = (page: Page, name: string) =>
  page
    .locator(`[data-figure="${name}"]`)
    .first()
    .textContent({ timeout: 1000 })
    .catch(() => null);

/** Waits until the page (refreshing itself every 2 s) shows `want` for `name`. */
const shows = (page: Page, name: string, want: string, ms = 60_000) =>
  eventually(async () => (await figure(page, name)) === want, ms, 500).catch(async () => {
    throw new Error(`${name} is ${JSON.stringify(await figure(page, name))}, not ${JSON.stringify(want)}`);
  });

test("a rollout waits at its pause step on the page; Promote (confirmed) takes it to 100% and promoted", async () => {
  const t0 = Date.now();
  const started = await rollout("start", "v2", "--steps", "50,pause,100", "--bake", "2s", "--gate", "minTasks=5");
  expect(started.code).toBe(0);
  const page = await signIn(OPERATOR);
  await shows(page, "rollout.awaiting", "waiting for promotion");
  const waitedAt = Date.now();
  expect(await figure(page, "rollout.state")).toBe("paused");
  expect(await figure(page, "rollout.percent")).toBe("50%");
  expect(await figure(page, "rollout.v2.shards")).toBe("8");
  expect(await page.locator('li.pause[aria-current="step"]').textContent()).toBe("pause");
  // The last gate reading behind the decision: canary against stable.
  expect(Number(await figure(page, "rollout.gate.canary.tasks"))).toBeGreaterThanOrEqual(5);
  expect(Number(await figure(page, "rollout.gate.stable.tasks"))).toBeGreaterThan(0);
  expect(await figure(page, "rollout.gate.verdict")).toBe("waiting for promotion after 50% in crl");
  await page.screenshot({ path: join(out, "rollout-paused.png"), fullPage: true });
  // It stays there: a pause step does not time out, nothing moves.
  await Bun.sleep(3000);
  expect(await figure(page, "rollout.state")).toBe("paused");
  let asked = "";
  page.once("dialog", (d) => {
    asked = d.message();
    void d.accept();
  });
  await page.getByRole("button", { name: /^Promote \(go on to 100%\) rollout / }).click();
  await shows(page, "rollout.state", "promoted");
  expect(asked).toContain("Promote (go on to 100%) rollout v2-");
  await shows(page, "rollout.v2.percent", "100%");
  expect(await page.locator("#flash").textContent()).toContain(": promote done, now running");
  console.log(
    `console-rollout: paused at 50% after ${((waitedAt - t0) / 1000).toFixed(1)} s; promoted ${((Date.now() - waitedAt) / 1000).toFixed(1)} s after reaching the pause (3 s of it waiting on purpose)`,
  );
}, 150_000);

test("Abort on the page gives the shards back to the stable version; a viewer has no button and gets 403", async () => {
  // v2 is now the stable version; v1 is the canary of this one, held at 50% by a long bake.
  expect((await rollout("start", "v1", "--steps", "50,100", "--bake", "10m")).code).toBe(0);
  const page = await signIn(OPERATOR);
  await shows(page, "rollout.v1.shards", "8");
  const viewer = await signIn(VIEWER);
  await shows(viewer, "rollout.state", "running");
  expect(await viewer.locator("button[data-rollout-verb]").count()).toBe(0);
  const refused = await fetch(`${base}/console/api/rollout/abort`, {
    method: "POST",
    headers: { authorization: `Bearer ${VIEWER}`, "x-console-action": "rollout" },
  });
  expect(refused.status).toBe(403);
  // An operator's script without the header is refused too; nothing changed.
  const noHeader = await fetch(`${base}/console/api/rollout/abort`, {
    method: "POST",
    headers: { authorization: `Bearer ${OPERATOR}` },
  });
  expect(noHeader.status).toBe(400);
  expect(await figure(page, "rollout.state")).toBe("running");

  page.once("dialog", (d) => void d.accept());
  await page.getByRole("button", { name: /^Abort rollout v1-/ }).click();
  await shows(page, "rollout.state", "aborted");
  await shows(page, "rollout.v2.shards", "16");
  expect(await page.locator("button[data-rollout-verb]").count()).toBe(0);
  expect((await rollout("status")).out).toContain("aborted");
  const audit = await s.db.sql<{ actor: string; action: string }[]>`
    select actor, action from audit_log where action like 'rollout.%' and actor like 'console:%' order by id`;
  expect(audit.map((a) => `${a.actor} ${a.action}`)).toEqual([
    "console:ops rollout.promote",
    "console:ops rollout.abort",
  ]);
}, 120_000);
