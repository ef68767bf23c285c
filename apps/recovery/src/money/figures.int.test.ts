// The money figures against a real Postgres: the newest sample and the last hour's spend per
// account, the reconciliation window's ends, and the spend today and over 30 days.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { readAccountFigures, readSpend } from "./figures.ts";
import { runReconcile } from "./run-reconcile.ts";

let tdb: TestDatabase;
let database: Database;
beforeAll(async () => {
  tdb = await createTestDatabase("money_figures");
  database = openDatabase(tdb.url, { max: 2 });
});
afterAll(async () => {
  await database.close();
  await tdb.drop();
});

const A = "2captcha.com/key_aaaaaaaaaaaa";
const B = "ocr.captchaai.com/key_bbbbbbbbbbbb";
async function sample(provider: string, micros: number, minutesAgo: number) {
  await database.sql`insert into provider_balances (provider, key_ref, region, balance_micros, sampled_at)
    values (${provider}, ${provider.split("/")[1]!}, 'mf', ${micros}, now() - ${`${minutesAgo} minutes`}::interval)`;
}
async function book(provider: string, micros: number, minutesAgo: number) {
  await database.sql`insert into ledger (task_id, kind, provider_task_id, owner, task_type, provider, region, solver_version, amount_micros, price_source, created_at)
    values (${randomUUID()}, ${micros < 0 ? "refund" : "charge"}, ${randomUUID()}, 'client', 'turnstile', ${provider}, 'mf', 'v1', ${micros}, 'provider', now() - ${`${minutesAgo} minutes`}::interval)`;
}

test("per account: the newest sample and the ledger's net over the last hour; spend without a sample is listed too", async () => {
  await sample(A, 10_000_000, 180);
  await sample(A, 9_000_000, 5);
  await book(A, 600_000, 120); // outside the hour
  await book(A, 400_000, 30);
  await book(A, 200_000, 10);
  await book(A, -100_000, 8);
  await book(B, 2990, 2);
  const figures = await readAccountFigures(database.sql);
  expect(figures.map((f) => ({ ...f, sampledAt: f.sampledAt === null ? null : typeof f.sampledAt }))).toEqual([
    { provider: A, balanceMicros: 9_000_000, sampledAt: "number", spentLastHourMicros: 500_000 },
    { provider: B, balanceMicros: null, sampledAt: null, spentLastHourMicros: 2990 },
  ]);
  expect(Math.abs(Date.now() - 5 * 60_000 - figures[0]!.sampledAt!)).toBeLessThan(5000);
});

test("reconcile over 2 h: the sample before the window's start to the newest one, the ledger's net between them", async () => {
  // A: 10.0 at 180 min ago (before the window), 9.0 at 5 min ago; booked between: 0.6 + 0.4 + 0.2 - 0.1 = 1.1.
  const r = await runReconcile(database.sql, 2, 10_000);
  const a = r.accounts.find((x) => x.provider === A)!;
  expect(a).toMatchObject({ ledgerNetMicros: 1_100_000, balanceDeltaMicros: 1_000_000, differenceMicros: -100_000 });
  expect(a.agrees).toBe(false);
  expect(r.differs).toBe(true);
  // B has spend and no sample: nothing to compare, not a difference.
  expect(r.accounts.find((x) => x.provider === B)).toMatchObject({ ledgerNetMicros: 2990, agrees: null });
  // Over 1 h the window still starts at the last sample before it (180 min ago): the same figures.
  const short = await runReconcile(database.sql, 1, 10_000);
  expect(short.accounts.find((x) => x.provider === A)).toMatchObject({
    ledgerNetMicros: 1_100_000,
    differenceMicros: -100_000,
  });
});

test("a balance that fell by exactly what was booked agrees", async () => {
  const C = "127.0.0.1:18090/key_cccccccccccc";
  await sample(C, 5_000_000, 50);
  await book(C, 2990, 40);
  await book(C, 1450, 30);
  await sample(C, 5_000_000 - 2990 - 1450, 20);
  const r = await runReconcile(database.sql, 1, 10_000);
  expect(r.accounts.find((x) => x.provider === C)).toMatchObject({
    ledgerNetMicros: 4440,
    balanceDeltaMicros: 4440,
    differenceMicros: 0,
    agrees: true,
  });
});

test("spend today and over 30 days: charged, refunded and net from the ledger", async () => {
  const s = await readSpend(database.sql);
  expect(s.last30Days).toEqual({ chargedMicros: 1_207_430, refundedMicros: 100_000, netMicros: 1_107_430 });
  // Today's share depends on the hour of the run (entries up to 3 h old): at most the 30 days'.
  expect(s.today.netMicros).toBeLessThanOrEqual(s.last30Days.netMicros);
  expect(s.today.chargedMicros - s.today.refundedMicros).toBe(s.today.netMicros);
});
