// The balance sampler against a real Postgres (the solver's own role) and the emulator as the
// provider: one getbalance per interval for a whole fleet, the balance stored in micro-dollars
// exactly as the provider printed it, the account named as the ledger names it, never the key.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Writable } from "node:stream";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import { createEmulator, type Emulator } from "@pipeline/emulator";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { toProviderParams } from "@pipeline/shared/provider";
import { createBalanceStore } from "../adapters/balances.ts";
import { createProviderClient } from "../adapters/provider.ts";
import { keyInUse } from "../domain/keyring.ts";
import { type BalanceSamplerDeps, sampleBalanceOnce, startBalanceSampler } from "./sampler.ts";

const KEY = "balance-sampler-key-0001";
let tdb: TestDatabase;
let owner: Database;
let solver: Database;
let emu: Emulator;
let logText = "";
const log = createLogger("solver", {
  level: "debug",
  destination: new Writable({
    write(chunk, _enc, cb) {
      logText += String(chunk);
      cb();
    },
  }),
});

beforeAll(async () => {
  tdb = await createTestDatabase("balance_sampler");
  owner = openDatabase(tdb.url, { max: 2 });
  solver = openDatabase(tdb.appUrls.solver, { max: 8 });
  emu = createEmulator({ port: 0, keys: { [KEY]: { threads: 10, balance: 12.5 } }, latencyMs: 20 });
  await emu.start();
});
afterAll(async () => {
  await emu.stop();
  await solver.close();
  await owner.close();
  await tdb.drop();
});

const key = keyInUse("main", KEY);
function deps(everyMs: number, region = "bs", k = key): BalanceSamplerDeps {
  return {
    store: createBalanceStore(solver.sql),
    provider: createProviderClient({ url: emu.url, timeoutMs: 5000 }),
    keys: { current: () => k },
    providerHost: new URL(emu.url).host,
    region,
    everyMs,
    log,
  };
}
const samples = (region = "bs") =>
  owner.sql<{ provider: string; key_ref: string; balance_micros: string; region: string }[]>`
    select provider, key_ref, balance_micros::text, region from provider_balances where region = ${region} order by sampled_at`;

test("eight solvers at once: one getbalance and one sample, the balance in micro-dollars, named host/key ref", async () => {
  const before = emu.stats().resCalls;
  const stored = await Promise.all(Array.from({ length: 8 }, () => sampleBalanceOnce(deps(60_000))));
  expect(stored.filter(Boolean).length).toBe(1);
  expect(emu.stats().resCalls - before).toBe(1);
  const rows = await samples();
  expect([...rows]).toEqual([
    { provider: `${new URL(emu.url).host}/${key.ref}`, key_ref: key.ref, balance_micros: "12500000", region: "bs" },
  ]);
  // Within the interval nobody asks again.
  expect(await sampleBalanceOnce(deps(60_000))).toBe(false);
  expect(emu.stats().resCalls - before).toBe(1);
});

test("after a solve the next sample is lower by exactly the provider's charge", async () => {
  const client = createProviderClient({ url: emu.url, timeoutMs: 5000, readPrice: true });
  const params = toProviderParams({
    type: "turnstile",
    params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/balance" },
  });
  const sub = await client.submit(params, KEY);
  if (sub.kind !== "ok") throw new Error(`submit: ${JSON.stringify(sub)}`);
  let price: unknown;
  for (let i = 0; i < 100 && price === undefined; i++) {
    const r = await client.poll(sub.value, KEY);
    if (r.kind === "ok") price = r.extra?.price;
    else await Bun.sleep(50);
  }
  expect(price).toBeDefined();
  await Bun.sleep(20);
  expect(await sampleBalanceOnce(deps(10))).toBe(true);
  const rows = await samples();
  expect(rows.length).toBe(2);
  expect(Number(rows[0]!.balance_micros) - Number(rows[1]!.balance_micros)).toBe(emu.books().totals.chargedMicros);
  expect(emu.books().totals.chargedMicros).toBe(1450);
});

test("a key the provider refuses stores nothing; the warning names the reply and never the key", async () => {
  const wrong = keyInUse("old", "balance-sampler-wrong-key");
  expect(await sampleBalanceOnce(deps(10, "bs_wrong", wrong))).toBe(false);
  expect((await samples("bs_wrong")).length).toBe(0);
  expect(logText).toContain("ERROR_WRONG_USER_KEY");
  expect(logText).not.toContain("balance-sampler-wrong-key");
  expect(logText).not.toContain(KEY);
});

test("the running sampler keeps the fleet to one sample per interval; stop() ends it", async () => {
  const fleet = Array.from({ length: 4 }, () => startBalanceSampler(deps(300, "bs_loop")));
  await Bun.sleep(1600);
  await Promise.all(fleet.map((s) => s.stop()));
  const n = (await samples("bs_loop")).length;
  // 1.6 s at one per 300 ms at most: 6 (the first at once), and the loop does sample repeatedly.
  expect(n).toBeGreaterThanOrEqual(3);
  expect(n).toBeLessThanOrEqual(6);
  const gaps = await owner.sql<{ ms: number }[]>`
    select extract(epoch from sampled_at - lag(sampled_at) over (order by sampled_at)) * 1000 as ms
    from provider_balances where region = 'bs_loop'`;
  for (const g of gaps.slice(1)) expect(Number(g.ms)).toBeGreaterThanOrEqual(290);
  await Bun.sleep(500);
  expect((await samples("bs_loop")).length).toBe(n);
});
