// The operator console in a real browser (issue 19): Debian's chromium driven by playwright-core,
// against a running stack (gateway, solver, emulator, NATS, Postgres) and the recovery service
// serving /console. The figures a person sees equal the API's once the system is still; a page
// left open updates by itself; a dead-lettered task is redriven with a click (confirmed, audited)
// and completes; a client API key and a viewer cannot do what an operator does; no token, key or
// password reaches a page; every control has a label; it reads at 1280x800 and on a phone.
// Screenshots go to the test's output folder (printed), docs/console.png and docs/console-phone.png.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@pipeline/devstack/testing";
import { formatMicros } from "@pipeline/shared/provider";
import { withHomeRegion } from "@pipeline/shared/regions";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { api, PROVIDER_KEY, type Proc, ROOT, type Stack, startStack } from "./harness.ts";
import { launchChromium, spawnConsole } from "./support/console-browser.ts";

const region = "console";
const OPERATOR = `op-${crypto.randomUUID()}`;
const VIEWER = `view-${crypto.randomUUID()}`;
const out = mkdtempSync(join(tmpdir(), "console-test-"));
let s: Stack;
let recovery: Proc;
let base: string;
let browser: Browser;
const shots: string[] = [];

beforeAll(async () => {
  s = await startStack({ region, solvers: 1, emulator: { latencyMs: 300 } });
  ({ recovery, base } = await spawnConsole(s, {
    region,
    tokens: `ops:operator:${OPERATOR},watcher:viewer:${VIEWER}`,
    out,
  }));
  browser = await launchChromium("console");
  console.error(`[console] screenshots in ${out}`);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await recovery?.kill("SIGTERM");
  await s?.stop();
});

async function signIn(
  token: string,
  viewport = { width: 1280, height: 800 },
): Promise<{ ctx: BrowserContext; page: Page }> {
  const ctx = await browser.newContext({ viewport });
  const page = await ctx.newPage();
  await page.goto(`${base}/console`);
  await expect(page.url()).toEndWith("/console/login");
  await page.getByLabel("Operator token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${base}/console`);
  return { ctx, page };
}

const figure = (page: Page, name: string) => page.locator(`[data-figure="${name}"]`).first().textContent();

async function shot(page: Page, name: string) {
  const path = join(out, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  shots.push(path);
  return path;
}

/** Submits n tasks through the gateway and waits until the API says each is completed. */
async function solved(n: number, prefix: string): Promise<string[]> {
  const ids = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const r = await api<{ id: string }>(s, "/v1/tasks", {
        method: "POST",
        body: {
          type: i % 2 ? "turnstile" : "recaptcha_v2",
          params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/${prefix}/${i}` },
        },
      });
      expect(r.status).toBe(202);
      return r.body.id;
    }),
  );
  for (const id of ids) {
    const r = await api<{ status: string }>(s, `/v1/tasks/${id}?wait=30`);
    expect(r.body.status).toBe("completed");
  }
  return ids;
}

test("a client API key is refused, by the page and by the JSON API; a viewer cannot redrive", async () => {
  for (const key of [s.apiKey, "", "not-a-token-at-all-000"]) {
    const r = await fetch(`${base}/console/api/state`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
    expect(r.status).toBe(401);
  }
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await ctx.newPage();
  await page.goto(`${base}/console`);
  expect(page.url()).toEndWith("/console/login");
  await page.getByLabel("Operator token").fill(s.apiKey);
  const res = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith("/console/login") && r.request().method() === "POST"),
    page.getByRole("button", { name: "Sign in" }).click(),
  ]);
  expect(res[0].status()).toBe(401);
  await expect(await page.getByRole("alert").textContent()).toContain("not a console token");
  await shot(page, "refused-client-key");
  await ctx.close();

  const viewer = await signIn(VIEWER);
  expect(await figure(viewer.page, "who")).toBe("watcher");
  expect(await viewer.page.locator("button[data-redrive]").count()).toBe(0);
  await viewer.ctx.close();
  const r = await fetch(`${base}/console/api/tasks/${crypto.randomUUID()}/redrive`, {
    method: "POST",
    headers: { authorization: `Bearer ${VIEWER}`, "x-console-action": "redrive" },
  });
  expect(r.status).toBe(403);
}, 60_000);

test("the figures on the page equal the API's, and the page updates by itself", async () => {
  const ids = await solved(12, "figures");
  const { ctx, page } = await signIn(OPERATOR);
  // The same moment: the system is still (every task final, and the solver's heartbeat, beaten
  // every few seconds, says so too: a beat taken while the last tasks finished still counts them in
  // flight), so the page, the console's JSON, the gateway's answers and the database all describe
  // one state.
  type State = {
    tasks: Array<{ state: string; type: string; n: number }>;
    window: { completed: number };
    provider: { solved: number; calls: number; extraPaid: number };
    fleet: { workers: Array<{ workerId: string; inFlight: number }> };
    keys: Array<{ keyRef: string; threads: number; inUse: number }>;
    money: {
      today: { netMicros: number };
      last30Days: { netMicros: number };
      accounts: Array<{ provider: string; balanceMicros: number | null }>;
    };
  };
  const readState = async () =>
    (await (
      await fetch(`${base}/console/api/state`, { headers: { authorization: `Bearer ${OPERATOR}` } })
    ).json()) as State;
  await eventually(
    async () => {
      const st = await readState();
      return (
        st.fleet.workers.length === 1 &&
        st.fleet.workers.every((w) => w.inFlight === 0) &&
        st.keys.every((k) => k.inUse === 0)
      );
    },
    15_000,
    200,
  );
  await page.reload();
  const state = await readState();
  const completed = state.tasks.filter((t) => t.state === "completed").reduce((a, t) => a + t.n, 0);
  expect(completed).toBe(ids.length);
  expect(Number(await figure(page, "tasks.total.completed"))).toBe(completed);
  for (const type of ["turnstile", "recaptcha_v2"]) {
    const n = state.tasks.find((t) => t.type === type && t.state === "completed")!.n;
    expect(n).toBe(ids.length / 2);
    expect(Number(await figure(page, `tasks.${region}.${type}.completed`))).toBe(n);
  }
  expect(Number(await figure(page, "window.completed"))).toBe(ids.length);
  expect(Number(await figure(page, "window.completed"))).toBe(state.window.completed);
  expect(Number(await figure(page, "provider.solved"))).toBe(state.provider.solved);
  expect(Number(await figure(page, "provider.calls"))).toBe(state.provider.calls);
  // Extra paid submissions: the emulator's own count of submissions, against tasks solved.
  expect(Number(await figure(page, "provider.extraPaid"))).toBe(s.emu.stats().submissions - ids.length);
  expect(Number(await figure(page, "provider.extraPaid"))).toBe(state.provider.extraPaid);
  expect(Number(await figure(page, "fleet.count"))).toBe(1);
  // Held under `<WORKER_ID>.<incarnation>`.
  const worker = state.fleet.workers[0]!.workerId;
  expect(worker).toMatch(/^solver-1\.i[0-9a-z]+$/);
  expect(await figure(page, `worker.${worker}.id`)).toBe(worker);
  expect(Number(await figure(page, `worker.${worker}.inFlight`))).toBe(state.fleet.workers[0]!.inFlight);
  const key = state.keys[0]!;
  expect(Number(await figure(page, `key.${key.keyRef}.inUse`))).toBe(key.inUse);
  expect(await figure(page, `key.${key.keyRef}.name`)).toBe("default");
  // Money: the ledger's spend (what the emulator charged) and the solvers' balance sample of the key.
  const usd = (m: number) => `$${formatMicros(m)}`;
  const [ledger] = await s.db.sql<
    { net: string }[]
  >`select coalesce(sum(amount_micros), 0)::text as net from ledger_all`;
  expect(Number(ledger!.net)).toBe(s.emu.books().totals.chargedMicros);
  expect(state.money.last30Days.netMicros).toBe(Number(ledger!.net));
  expect(await figure(page, "money.last30Days.net")).toBe(usd(Number(ledger!.net)));
  expect(await figure(page, "money.today.net")).toBe(usd(state.money.today.netMicros));
  const account = state.money.accounts[0]!;
  expect(account.provider).toEndWith(`/${key.keyRef}`);
  expect(await figure(page, `money.${account.provider}.balance`)).toBe(usd(account.balanceMicros!));
  expect(await figure(page, `money.${account.provider}.hoursLeft`)).toMatch(/^\d+\.\d h$/);
  expect(await page.locator("svg.chart rect.bar").count()).toBe(15);
  // Rollouts: the region's shard assignment (rollout_<region>), all 16 shards with the one version.
  expect(Number(await figure(page, "rollout.v1.shards"))).toBe(16);
  expect(await figure(page, "rollout.v1.percent")).toBe("100%");
  // No rollout was ever started (no rollout_control stream): the panel says so, it is no error.
  expect(await page.locator("#h-rollouts").locator("..").textContent()).toContain("no rollout has run");
  expect(await page.content()).not.toContain("unreadable");
  // The region is named "console": the heading labels it, never "Pipeline console console".
  expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Pipeline console region console");
  // One more task while the page stays open: it shows up without a reload.
  await solved(1, "live");
  await eventually(async () => Number(await figure(page, "tasks.total.completed")) === ids.length + 1, 15_000, 200);
  // A task's timeline by id: every event, the provider id, who claimed it.
  await page.getByLabel("Task id").fill(ids[0]!);
  await page.getByRole("button", { name: "Show timeline" }).click();
  await page.locator('[data-figure="timeline.state"]').waitFor();
  expect(await figure(page, "timeline.state")).toBe("completed");
  const [row] = await s.db.sql<{ provider_id: string }[]>`select provider_id from tasks where id = ${ids[0]!}`;
  expect(await figure(page, "timeline.provider-id")).toBe(row!.provider_id);
  const kinds = await page.locator("#timeline-events tbody tr td:nth-child(3)").allTextContents();
  // The claim says `solving` with its `submitted` event, not before it (no `solving` event of its own).
  expect(kinds).toEqual(["accepted", "submitted", "completed"]);
  expect(await page.locator("#timeline-events").textContent()).toContain("worker=solver-1");
  expect(await figure(page, "timeline.token")).toBe("stored (never shown)");
  await shot(page, "timeline-1280x800");
  await ctx.close();
}, 90_000);

test("a dead-lettered task is redriven with a click, confirmed and audited, and completes", async () => {
  const id = withHomeRegion(crypto.randomUUID(), [region], region);
  // What the solver leaves behind when it gives a task up (state failed, a dead letter), owned by
  // the test's client (the owner the gateway stored for its earlier tasks).
  const owner = (await s.db.sql<{ owner: string }[]>`select owner from tasks limit 1`)[0]!.owner;
  await s.db.sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, version, attempts, error_code, error_message, deadline_at, created_at, updated_at, completed_at)
    values (${id}, ${owner}, 'hash', ${region}, 'turnstile', 'normal', ${JSON.stringify({ sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/dead" })}::text::jsonb,
            'failed', 3, 5, 'ERROR_CAPTCHA_UNSOLVABLE', 'dead-lettered: too many attempts', now() - interval '1 minute', now() - interval '5 minutes', now() - interval '1 minute', now() - interval '1 minute')`;
  expect((await api<{ status: string }>(s, `/v1/tasks/${id}`)).body.status).toBe("failed");
  const { ctx, page } = await signIn(OPERATOR);
  const button = page.getByRole("button", { name: `Redrive task ${id}` });
  await button.waitFor({ timeout: 10_000 });
  expect(await page.locator("#dlq").textContent()).toContain("dead-lettered: too many attempts");
  // The README's picture: the live page with a dead letter waiting for its redrive.
  copyFileSync(await shot(page, "dead-letter-1280x800"), join(ROOT, "docs", "console.png"));
  const dialogs: string[] = [];
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    void d.accept();
  });
  await button.click();
  await page.getByRole("status").filter({ hasText: "redriven" }).waitFor({ timeout: 10_000 });
  expect(dialogs.length).toBe(1);
  expect(dialogs[0]).toContain(id);
  // The page follows the task to its end (the timeline refreshes with the panels).
  await eventually(async () => (await figure(page, "timeline.state")) === "completed", 30_000, 250);
  const view = await api<{ status: string; result?: { token: string } }>(s, `/v1/tasks/${id}?wait=10`);
  expect(view.body.status).toBe("completed");
  const kinds = await page.locator("#timeline-events tbody tr td:nth-child(3)").allTextContents();
  expect(kinds).toEqual(expect.arrayContaining(["redriven", "submitted", "completed"]));
  expect(await page.locator("#timeline").textContent()).toContain("console:ops");
  const audit = await s.db.sql<
    { actor: string; action: string; detail: { taskId: string } }[]
  >`select actor, action, detail from audit_log where action = 'task.redrive'`;
  expect(audit.map((a) => [a.actor, a.detail.taskId])).toEqual([["console:ops", id]]);
  await eventually(async () => (await page.locator("button[data-redrive]").count()) === 0, 10_000, 200);
  await shot(page, "redriven");
  // Redriving it again is refused: only failed tasks can be.
  const again = await fetch(`${base}/console/api/tasks/${id}/redrive`, {
    method: "POST",
    headers: { authorization: `Bearer ${OPERATOR}`, "x-console-action": "redrive" },
  });
  expect(again.status).toBe(409);
  await ctx.close();
}, 90_000);

test("the task explorer filters, searches, pages and opens a row's timeline; a bad query names its field", async () => {
  const ids = await solved(4, "explorer");
  // 60 more rows of one client, so that a filter spans two pages of 50.
  await s.db.sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, version, created_at, updated_at, completed_at)
    select gen_random_uuid(), 'explorer-client', 'h', ${region}, 'geetest', 'low', '{}'::jsonb, 'cancelled', 1,
           now() - i * interval '1 second', now(), now()
    from generate_series(1, 60) as i`;
  const { ctx, page } = await signIn(VIEWER);
  const find = async () => {
    await page.getByRole("button", { name: "Find tasks" }).click();
    await page.locator("#explorer-rows").waitFor();
  };
  /** The task ids of the rows shown, in order. */
  const rowIds = async () => {
    const trs = page.locator("#explorer-rows tbody tr[data-row]");
    const out: string[] = [];
    for (let i = 0; i < (await trs.count()); i++) out.push((await trs.nth(i).getAttribute("data-row"))!);
    return out;
  };
  const column = (name: string) => page.locator(`#explorer-rows td[data-col="${name}"]`).allTextContents();
  // Filter: completed turnstile tasks, as many as the table holds.
  await page.getByLabel("State", { exact: true }).selectOption("completed");
  await page.getByLabel("Type", { exact: true }).selectOption("turnstile");
  await find();
  const [n] = await s.db.sql<
    { n: number }[]
  >`select count(*)::int as n from tasks where state = 'completed' and type = 'turnstile'`;
  expect((await column("type")).length).toBe(n!.n);
  expect(new Set(await column("type"))).toEqual(new Set(["turnstile"]));
  expect(new Set(await column("state"))).toEqual(new Set(["completed"]));
  // Search: the start of a pageurl, without its scheme, finds exactly the four tasks sent to it.
  await page.getByRole("button", { name: "Clear" }).click();
  await page.getByLabel("Search", { exact: true }).fill("example.com/explorer/");
  await find();
  const shown = await rowIds();
  expect(shown.sort()).toEqual([...ids].sort());
  await shot(page, "explorer-1280x800");
  // A row opens its timeline.
  await page.getByRole("link", { name: `Timeline of task ${ids[0]}` }).click();
  await page.locator('[data-figure="timeline.state"]').waitFor();
  expect(await figure(page, "timeline.id")).toBe(ids[0]!);
  expect(await figure(page, "timeline.state")).toBe("completed");
  // Pages: a client's 60 rows in two pages of 50 and 10, each row once, as the JSON API gives them.
  await page.getByRole("button", { name: "Clear" }).click();
  await page.getByLabel("Client", { exact: true }).fill("explorer-client");
  await find();
  const first = await rowIds();
  expect(first.length).toBe(50);
  const auth = { headers: { authorization: `Bearer ${VIEWER}` } };
  const json = (await (await fetch(`${base}/console/api/tasks?client=explorer-client`, auth)).json()) as {
    rows: Array<{ id: string }>;
    next: string;
  };
  expect(json.rows.map((r) => r.id)).toEqual(first);
  await page.getByRole("button", { name: "Older" }).click();
  await eventually(async () => (await figure(page, "explorer.page")) === "2", 10_000, 100);
  const second = await rowIds();
  expect(second.length).toBe(10);
  expect(new Set([...first, ...second]).size).toBe(60);
  expect(await page.locator("#explorer-out").textContent()).toContain("no more");
  // A bad query: a 400 naming the field, on the JSON API and on the page's form.
  const bad = await fetch(`${base}/console/api/tasks?limit=0&state=done`, auth);
  expect(bad.status).toBe(400);
  expect(((await bad.json()) as { fields: string[] }).fields.sort()).toEqual(["limit", "state"]);
  expect((await fetch(`${base}/console/api/tasks`)).status).toBe(401);
  await page.getByLabel("Client", { exact: true }).fill("a client with spaces");
  await find().catch(() => {});
  await page.locator('[data-figure="explorer.error"]').waitFor();
  expect(await figure(page, "explorer.error")).toContain("client");
  expect(await page.getByLabel("Client", { exact: true }).getAttribute("aria-invalid")).toBe("true");
  await ctx.close();
}, 90_000);

test("sign-out in the browser revokes the session: a copy of its cookie stops working", async () => {
  const { ctx, page } = await signIn(VIEWER);
  const cookie = (await ctx.cookies()).find((c) => c.name === "console_session")!;
  expect(cookie.httpOnly).toBe(true);
  const copied = `${cookie.name}=${cookie.value}`;
  expect((await fetch(`${base}/console/api/state`, { headers: { cookie: copied } })).status).toBe(200);
  // The page's own form: what the browser sends (Origin, Sec-Fetch-Site) passes the same-origin check.
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.waitForURL(`${base}/console/login`);
  expect((await fetch(`${base}/console/api/state`, { headers: { cookie: copied } })).status).toBe(401);
  await ctx.close();
}, 60_000);

test("no token, key or password in any page; every control labelled; reads at 1280x800 and on a phone", async () => {
  const secrets = [
    PROVIDER_KEY,
    s.apiKey,
    OPERATOR,
    VIEWER,
    ...(await s.db.sql<{ token: string }[]>`select token from tasks where token is not null`).map((r) => r.token),
  ];
  const creds = JSON.parse(readFileSync(s.nats.credentialsFile!, "utf8")) as Record<string, { password: string }>;
  secrets.push(...Object.values(creds).map((c) => c.password));
  expect(secrets.length).toBeGreaterThan(10);
  const [done] = await s.db.sql<{ id: string }[]>`select id from tasks where state = 'completed' limit 1`;
  for (const viewport of [
    { width: 1280, height: 800 },
    { width: 390, height: 844 },
  ]) {
    const { ctx, page } = await signIn(OPERATOR, viewport);
    await page.getByLabel("Task id").fill(done!.id);
    await page.getByRole("button", { name: "Show timeline" }).click();
    await page.locator('[data-figure="timeline.state"]').waitFor();
    const texts = [
      await page.content(),
      await (await fetch(`${base}/console/api/state`, { headers: { authorization: `Bearer ${OPERATOR}` } })).text(),
      await (
        await fetch(`${base}/console/api/tasks/${done!.id}`, { headers: { authorization: `Bearer ${OPERATOR}` } })
      ).text(),
    ];
    for (const t of texts) for (const secret of secrets) expect(t.includes(secret)).toBe(false);
    // Every control has an accessible name (a label, aria-label or its text).
    // (Evaluated in the page; a string, since the tests are not type-checked against the DOM.)
    const unlabelled = (await page.evaluate(`[...document.querySelectorAll("input, button, select, textarea, a[href]")]
      .filter((el) => !((el.getAttribute("aria-label") || "").trim() || (el.labels ? [...el.labels].map((l) => l.textContent || "").join("").trim() : "") || (el.tagName !== "INPUT" ? (el.textContent || "").trim() : "")))
      .map((el) => el.outerHTML.slice(0, 120))`)) as string[];
    expect(unlabelled).toEqual([]);
    // It reads: no sideways scrolling of the page itself (wide tables scroll in their own box).
    const overflow = (await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
    expect(overflow).toBeLessThanOrEqual(0);
    expect(await page.getByRole("heading", { name: "Tasks by state and type" }).isVisible()).toBe(true);
    await shot(page, `console-${viewport.width}x${viewport.height}`);
    // The phone's first screen, as a person holding it sees it (docs/console-phone.png).
    if (viewport.width < 600) {
      await page.evaluate("window.scrollTo(0, 0)");
      await page.screenshot({ path: join(ROOT, "docs", "console-phone.png") });
    }
    await ctx.close();
  }
  // Neither the console's tokens nor the provider key were logged.
  for (const secret of [OPERATOR, VIEWER, PROVIDER_KEY]) expect(recovery.log().includes(secret)).toBe(false);
  expect(recovery.log()).toContain("console listening");
  console.log(`[console] screenshots: ${shots.join(", ")}`);
}, 90_000);
