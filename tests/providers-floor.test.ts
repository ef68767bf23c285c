// A provider account below its balance floor (PROVIDER_BALANCE_FLOOR, docs/providers.md): the
// solvers' balance samples say the cheaper account is nearly out of money, so new tasks go to the
// dearer one before the first runs dry; the first still takes tasks when the other cannot.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { eventually } from "@pipeline/devstack/testing";
import { createEmulator, type Emulator } from "@pipeline/emulator";
import type { TaskView } from "@pipeline/shared/schemas";
import { api, PROVIDER_KEY, type Stack, startStack } from "./harness.ts";

const B_KEY = "provider-b-key-floor-0123456789";
let s: Stack;
let b: Emulator;

beforeAll(async () => {
  b = createEmulator({ port: 0, keys: { [B_KEY]: { threads: 200, balance: 1000 } }, latencyMs: 50 });
  await b.start();
  s = await startStack({
    region: "floor",
    // $0.50 left on the cheaper account, under the $1 floor.
    emulator: { latencyMs: 50, keys: { [PROVIDER_KEY]: { threads: 1000, balance: 0.5 } } },
    solverEnv: {
      PROVIDERS: JSON.stringify([{ id: "b", url: b.url, keyEnv: "PROVIDER_KEY_B", prices: { turnstile: 0.003 } }]),
      PROVIDER_KEY_B: B_KEY,
      PROVIDER_BALANCE_FLOOR: "1",
      BALANCE_POLL_MS: "500",
      FIRST_POLL_MS: "100",
      POLL_INTERVAL_MS: "200",
    },
  });
}, 60_000);
afterAll(async () => {
  await s?.stop();
  await b?.stop();
}, 30_000);

const task = (i: number) => ({
  type: "turnstile",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/floor/${i}` },
});

test("the cheaper account under its balance floor: new tasks go to the other one", async () => {
  // Both accounts sampled; the samples reach routing at the solvers' next read (every 2 s).
  await eventually(async () => {
    const [r] = await s.db.sql<{ n: number }[]>`select count(distinct key_ref)::int as n from provider_balances`;
    return r!.n === 2;
  }, 10_000);
  await Bun.sleep(2500);
  const before = { a: s.emu.stats().submissions, b: b.stats().submissions };
  const ids = await Promise.all(
    Array.from(
      { length: 30 },
      async (_, i) => (await api<{ id: string }>(s, "/v1/tasks", { method: "POST", body: task(i) })).body.id,
    ),
  );
  for (const id of ids) expect((await api<TaskView>(s, `/v1/tasks/${id}?wait=30`)).body.status).toBe("completed");
  const toA = s.emu.stats().submissions - before.a;
  const toB = b.stats().submissions - before.b;
  console.log(
    `[floor] 30 tasks with the cheaper account at $0.50 under a $1 floor: ${toB} to the dearer account, ${toA} to the cheaper`,
  );
  expect(toB).toBe(30);
  expect(toA).toBe(0);
}, 60_000);
