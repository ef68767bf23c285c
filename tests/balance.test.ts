// The provider's balance, end to end: the solvers sample it (getbalance) while tasks are solved, the
// samples fall by exactly what the emulator charged, `recovery reconcile` finds the ledger and the
// balance agree (difference 0, exit 0), and `recovery assess` shows the hours left.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, natsEnv } from "@pipeline/devstack";
import { eventually } from "@pipeline/devstack/testing";
import type { TaskSpec, TaskView } from "@pipeline/shared/schemas";
import { PROVIDER_KEY, type Proc, ROOT, type Stack, spawnApp, startStack } from "./harness.ts";
import { runRecoveryCli } from "./support/recovery-cli.ts";

const region = "balance";
const snapshots = mkdtempSync(join(tmpdir(), "balance-test-"));
let s: Stack;
beforeAll(async () => {
  s = await startStack({ region, solvers: 2, emulator: { latencyMs: 20 }, solverEnv: { BALANCE_POLL_MS: "400" } });
}, 60_000);
let service: Proc | undefined;
afterAll(async () => {
  await service?.kill("SIGTERM");
  await s?.stop();
  rmSync(snapshots, { recursive: true, force: true });
}, 30_000);

function spec(i: number): TaskSpec {
  const pageurl = `https://shop.example.com/balance/${i}`;
  switch (i % 3) {
    case 0:
      return { type: "recaptcha_v2", params: { sitekey: "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", pageurl } };
    case 1:
      return { type: "turnstile", params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl } };
    default:
      return { type: "image", params: { body: Buffer.from(`balance image ${i}`).toString("base64"), numeric: 1 } };
  }
}

async function solveAll(n: number): Promise<void> {
  const ids = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const res = await fetch(`${s.gatewayUrl}/v1/tasks`, {
        method: "POST",
        headers: { authorization: `Bearer ${s.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify(spec(i)),
      });
      expect(res.status).toBe(202);
      return ((await res.json()) as { id: string }).id;
    }),
  );
  for (const id of ids) {
    const res = await fetch(`${s.gatewayUrl}/v1/tasks/${id}?wait=30`, {
      headers: { authorization: `Bearer ${s.apiKey}` },
    });
    expect(((await res.json()) as TaskView).status).toBe("completed");
  }
}

async function until(what: string, check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(100);
  }
}

const samples = async () =>
  (
    await s.db.sql<{ provider: string; balance: string; region: string }[]>`
      select provider, balance_micros::text as balance, region from provider_balances order by sampled_at`
  ).map((r) => ({ ...r, balance: Number(r.balance) }));

/** A recovery command against the stack, as an operator runs it; stdout and stderr together. */
async function recovery(...args: string[]): Promise<{ code: number; out: string }> {
  const r = await runRecoveryCli(s, { region, snapshotDir: snapshots }, args);
  return { code: r.code, out: `${r.out}${r.err}` };
}

test("30 tasks solved: the balance samples fall by exactly the emulator's charges, the fleet samples at most every BALANCE_POLL_MS", async () => {
  await until("a first balance sample", async () => (await samples()).length > 0);
  const [first] = await samples();
  expect(first!.provider).toMatch(/^127\.0\.0\.1:\d+\/key_[0-9a-f]{12}$/);
  expect(first!.region).toBe(region);
  expect(s.emu.books().totals.charges).toBe(0);

  await solveAll(30);
  const books = s.emu.books();
  expect(books.totals.charges).toBe(30);
  // A sample taken after the last charge was booked.
  await until("a sample after the last booking", async () => {
    const [r] = await s.db.sql<{ n: number }[]>`
      select count(*)::int as n from provider_balances where sampled_at > (select max(created_at) from ledger_all)`;
    return r!.n > 0;
  });
  const all = await samples();
  const last = all.at(-1)!;
  expect(first!.balance - last.balance).toBe(books.totals.chargedMicros);
  const [ledger] = await s.db.sql<{ net: string }[]>`select sum(amount_micros)::text as net from ledger_all`;
  expect(Number(ledger!.net)).toBe(books.totals.chargedMicros);
  // Never rises (no top-up here), and two solvers kept to one sample per 400 ms.
  for (let i = 1; i < all.length; i++) expect(all[i]!.balance).toBeLessThanOrEqual(all[i - 1]!.balance);
  const gaps = await s.db.sql<{ ms: number }[]>`
    select extract(epoch from sampled_at - lag(sampled_at) over (order by sampled_at)) * 1000 as ms from provider_balances`;
  for (const g of gaps.slice(1)) expect(Number(g.ms)).toBeGreaterThanOrEqual(390);
}, 90_000);

test("recovery reconcile: ledger net equals the balance delta, difference 0, exit 0", async () => {
  const r = await recovery("reconcile", "--hours", "1");
  expect(r.code).toBe(0);
  const charged = s.emu.books().totals.chargedMicros;
  const usd = `$0.${String(charged).padStart(6, "0")}`;
  expect(r.out).toMatch(
    new RegExp(
      `ok +127\\.0\\.0\\.1:\\d+/key_\\w+ +ledger net \\${usd} +balance delta \\${usd} +difference \\$0\\.000000`,
    ),
  );
  const json = await recovery("reconcile", "--hours", "1", "--json");
  expect(json.code).toBe(0);
  const parsed = JSON.parse(json.out) as {
    differs: boolean;
    accounts: { differenceMicros: number; ledgerNetMicros: number }[];
  };
  expect(parsed.differs).toBe(false);
  expect(parsed.accounts).toHaveLength(1);
  expect(parsed.accounts[0]).toMatchObject({ differenceMicros: 0, ledgerNetMicros: charged });
}, 30_000);

test("recovery assess shows each account's balance, spend rate and hours left", async () => {
  const r = await recovery("assess");
  expect(r.out).toMatch(
    /ok +balance +127\.0\.0\.1:\d+\/key_\w+: balance \$\d+\.\d{6}, spend \$0\.\d{6}\/h, \d+ h left, sampled \d+ s ago/,
  );
  const json = JSON.parse((await recovery("assess", "--json")).out) as {
    balances: { hoursLeft: number; spendPerHourMicros: number }[];
  };
  expect(json.balances).toHaveLength(1);
  expect(json.balances[0]!.spendPerHourMicros).toBe(s.emu.books().totals.chargedMicros);
  expect(json.balances[0]!.hoursLeft).toBeGreaterThan(1000);
}, 30_000);

test("the recovery service reconciles on its timer: logged, difference 0 in recovery_reconcile_difference_micros; the balance gauges", async () => {
  const port = await freePort();
  service = spawnApp(
    "recovery",
    "apps/recovery/src/main.ts",
    {
      NATS_URL: s.nats.url,
      ...natsEnv(s.nats, "recovery"),
      DATABASE_URL: s.tdb.url,
      REGION: region,
      LOG_LEVEL: "info",
      SNAPSHOT_DIR: snapshots,
      SNAPSHOT_INTERVAL_MS: "0",
      RECONCILE_INTERVAL_MS: "1000",
      RECONCILE_HOURS: "1",
      RECOVERY_METRICS_PORT: String(port),
    },
    s.logDir,
  );
  const metrics = () =>
    fetch(`http://127.0.0.1:${port}/metrics`)
      .then((r) => r.text())
      .catch(() => "");
  const text = await eventually(
    async () => {
      const t = await metrics();
      return /recovery_reconcile_difference_micros\{provider="[^"]+",app="recovery"\} 0/.test(t) ? t : undefined;
    },
    30_000,
    200,
  );
  const charged = s.emu.books().totals.chargedMicros;
  expect(text).toMatch(
    new RegExp(`recovery_reconcile_ledger_net_micros\\{provider="[^"]+",app="recovery"\\} ${charged}\n`),
  );
  expect(text).toMatch(
    new RegExp(`pipeline_provider_spend_micros_per_hour\\{provider="[^"]+",app="recovery"\\} ${charged}\n`),
  );
  expect(text).toMatch(/pipeline_provider_balance_hours_left\{provider="[^"]+",app="recovery"\} \d+/);
  const line = service
    .log()
    .split("\n")
    .find((l) => l.includes('"msg":"reconcile"'));
  expect(line).toBeDefined();
  expect(JSON.parse(line!)).toMatchObject({ differenceMicros: 0, ledgerNetMicros: charged, hours: 1 });
  expect(service.exitCode()).toBeUndefined();
}, 60_000);
