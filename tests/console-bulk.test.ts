// The console's bulk redrive in a real browser (Debian's chromium via playwright-core) against a
// running stack (gateway, solver, emulator, NATS, Postgres) and the recovery service: 200 dead
// letters, "Redrive all matching", the preview's count, the confirm, "redriven 200 of 200", its one
// audit row, the solver completing them, and a second confirm that redrives none. Then the preview's
// time at 10,000 dead letters (and the confirm's at the limit of 1,000), printed for docs/console.md.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@pipeline/devstack/testing";
import { withHomeRegion } from "@pipeline/shared/regions";
import type { Browser } from "playwright-core";
import { type Proc, type Stack, startStack } from "./harness.ts";
import { launchChromium, signInAs, spawnConsole } from "./support/console-browser.ts";

const region = "bulkui";
const OPERATOR = `op-${crypto.randomUUID()}`;
const out = mkdtempSync(join(tmpdir(), "console-bulk-test-"));
let s: Stack;
let recovery: Proc;
let base: string;
let browser: Browser;

beforeAll(async () => {
  s = await startStack({ region, solvers: 1, emulator: { latencyMs: 50 } });
  ({ recovery, base } = await spawnConsole(s, { region, tokens: `ops:operator:${OPERATOR}`, out }));
  browser = await launchChromium("console-bulk");
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await recovery?.kill("SIGTERM");
  await s?.stop();
});

/** `n` dead letters of `owner` (what the solver leaves when it gives a task up), homed here. */
async function deadLetters(n: number, owner: string): Promise<string[]> {
  const ids = Array.from({ length: n }, () => withHomeRegion(crypto.randomUUID(), [region], region));
  const params = JSON.stringify({ sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/bulk" });
  await s.db.sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, version, attempts, error_code,
                       error_message, created_at, updated_at, completed_at)
    select id, ${owner}, 'hash', ${region}, 'turnstile', 'normal', ${params}::text::jsonb, 'failed', 3, 5,
           'ERROR_CAPTCHA_UNSOLVABLE', 'dead-lettered: too many attempts', now() - interval '10 minutes', now(), now()
    from unnest(${ids}::uuid[]) as id`;
  return ids;
}

test("200 dead letters: Redrive all matching, the preview, confirm, redriven 200 of 200, audited once, solved; again: 0", async () => {
  await deadLetters(200, "bulk-client");
  const { ctx, page } = await signInAs(browser, base, OPERATOR);
  const redrive = page.getByRole("button", { name: "Redrive all matching" });
  expect(await redrive.isVisible()).toBe(false);
  await page.getByLabel("State", { exact: true }).selectOption("failed");
  await page.getByLabel("Client", { exact: true }).fill("bulk-client");
  await redrive.click();
  await page.locator('[data-figure="bulk.preview"]').waitFor();
  expect(await page.locator('[data-figure="bulk.preview"]').textContent()).toBe("200 tasks match; redrive them?");
  await page.screenshot({ path: join(out, "bulk-preview.png"), fullPage: true });
  const confirm = page.getByRole("button", { name: "Confirm: redrive 200" });
  await confirm.click();
  const result = page.locator('[data-figure="bulk.result"]');
  await result.waitFor({ timeout: 60_000 });
  expect(await result.textContent()).toBe("redriven 200 of 200; 0 refused");
  expect(await page.locator('[data-figure="bulk.audit"]').textContent()).toContain("bulk.redrive");
  await page.screenshot({ path: join(out, "bulk-result.png"), fullPage: true });
  const audit = await s.db.sql<{ actor: string; detail: { done: number } }[]>`
    select actor, detail from audit_log where action = 'bulk.redrive'`;
  expect(audit).toHaveLength(1);
  expect(audit[0]!.actor).toBe("console:ops");
  expect(audit[0]!.detail.done).toBe(200);
  // Each was redriven once (none published twice) and the running solver completes them.
  const redrives = await s.db.sql<{ redrives: number; n: number }[]>`
    select redrives, count(*)::int as n from tasks where owner = 'bulk-client' group by 1`;
  expect([...redrives]).toEqual([{ redrives: 1, n: 200 }]);
  await eventually(
    async () =>
      (await s.db.sql`select 1 from tasks where owner = 'bulk-client' and state = 'completed'`).length === 200,
    90_000,
    500,
  );
  // Again (the same preview): none is failed any more.
  await page.getByRole("button", { name: "Confirm again" }).click();
  await eventually(async () => (await result.textContent())?.startsWith("redriven 0 of 0") === true, 30_000, 100);
  expect(await result.textContent()).toBe("redriven 0 of 0; 0 refused; previewed 200, now 0");
  await redrive.click();
  await eventually(
    async () =>
      (await page.locator('[data-figure="bulk.preview"]').textContent()) === "no task matches; nothing to redrive",
    10_000,
    100,
  );
  expect((await s.db.sql`select 1 from audit_log where action = 'bulk.redrive'`).length).toBe(2);
  await ctx.close();
}, 240_000);

test("the preview's time at 10,000 dead letters, and the confirm's at the limit (1,000)", async () => {
  await deadLetters(10_000, "bulk-10k");
  await s.db.sql`analyze tasks`;
  const post = (path: string, body: unknown) =>
    fetch(`${base}/console/api/bulk/${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${OPERATOR}`, "content-type": "application/json", "x-console-action": "bulk" },
      body: JSON.stringify(body),
    });
  const times: number[] = [];
  let token = "";
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    const r = (await (await post("preview", { action: "redrive", filter: { client: "bulk-10k" } })).json()) as {
      count: number;
      line: string;
      token: string;
    };
    times.push(performance.now() - t0);
    expect(r.count).toBe(10_000);
    expect(r.line).toBe(
      "10,000 tasks match, over the limit of 1,000 per operation (CONSOLE_BULK_MAX); redrive the oldest 1,000?",
    );
    token = r.token;
  }
  times.sort((a, b) => a - b);
  const t0 = performance.now();
  const r = (await (await post("confirm", { action: "redrive", token })).json()) as { line: string };
  const confirmMs = performance.now() - t0;
  expect(r.line).toBe(
    "redriven 1,000 of 1,000; 0 refused; 9,000 more match beyond the limit of 1,000 (CONSOLE_BULK_MAX): run it again",
  );
  console.error(
    `[console-bulk] preview at 10,000 dead letters: median ${times[2]!.toFixed(0)} ms (min ${times[0]!.toFixed(0)}, max ${times[4]!.toFixed(0)}); confirm of 1,000: ${confirmMs.toFixed(0)} ms`,
  );
}, 240_000);
