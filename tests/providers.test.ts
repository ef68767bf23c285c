// Two provider accounts (PROVIDERS, docs/providers.md): PROVIDER_URL's emulator A, the cheaper,
// and a second emulator B with its own key, higher prices and slower solves. Under steady load A
// goes down: its breaker opens, new tasks go to B, A's parked tasks wait for it; A comes back:
// its breaker closes and traffic is on A again. Nothing is lost, no task is at two providers at
// once, and the ledger's spend per account equals each emulator's books to the micro-dollar.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createEmulator, type Emulator } from "@pipeline/emulator";
import type { TaskView } from "@pipeline/shared/schemas";
import { api, type Stack, startStack } from "./harness.ts";

const B_KEY = "provider-b-key-0123456789";
const RATE = Number(process.env.DRILL_RATE ?? 20);
// `OUTAGE_MS=30000` is the full drill; CI runs 12 s.
const OUTAGE_MS = Number(process.env.OUTAGE_MS ?? 12_000);
let s: Stack;
let b: Emulator;

beforeAll(async () => {
  b = createEmulator({
    port: 0,
    keys: { [B_KEY]: { threads: 200, balance: 1000 } },
    latencyMs: 300,
    prices: { turnstile: 0.003 },
  });
  await b.start();
  s = await startStack({
    region: "providers",
    emulator: { latencyMs: 100 },
    solverEnv: {
      PROVIDERS: JSON.stringify([{ id: "b", url: b.url, keyEnv: "PROVIDER_KEY_B", prices: { turnstile: 0.003 } }]),
      PROVIDER_KEY_B: B_KEY,
      FIRST_POLL_MS: "100",
      POLL_INTERVAL_MS: "200",
      BREAKER_MIN_CALLS: "5",
      BREAKER_COOLDOWN_MS: "1000",
      BREAKER_MAX_COOLDOWN_MS: "2000",
      RETRY_BASE_MS: "200",
      RETRY_MAX_MS: "1000",
    },
  });
}, 60_000);
afterAll(async () => {
  await s?.stop();
  await b?.stop();
}, 30_000);

const task = (i: number) => ({
  type: "turnstile",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/providers/${i}` },
});

/** Submits RATE tasks a second until stopped; every 202's id and when it was accepted. */
function load() {
  const acked: { id: string; at: number }[] = [];
  let running = true;
  let n = 0;
  const loop = (async () => {
    while (running) {
      const t0 = Date.now();
      const i = n++;
      void api<{ id: string }>(s, "/v1/tasks", { method: "POST", body: task(i) }).then((r) => {
        if (r.status === 202) acked.push({ id: r.body.id, at: Date.now() });
      });
      await Bun.sleep(Math.max(0, 1000 / RATE - (Date.now() - t0)));
    }
  })();
  return {
    acked,
    async stop() {
      running = false;
      await loop;
      await Bun.sleep(500);
    },
  };
}

const submissions = () => ({ a: s.emu.stats().submissions, b: b.stats().submissions });

test(`provider A down ${OUTAGE_MS / 1000} s under ${RATE} tasks/s: B takes the new tasks, 0 lost, back on A after; the ledger equals both emulators' books`, async () => {
  const l = load();
  try {
    await run(l);
  } finally {
    await l.stop();
  }
}, 180_000);

async function run(l: ReturnType<typeof load>) {
  await Bun.sleep(5000);
  const before = submissions();
  expect(before.a).toBeGreaterThan(RATE * 3);
  // A cheaper than B: while A is up, the tasks go to A.
  expect(before.b).toBeLessThanOrEqual(before.a / 10);
  const downAt = Date.now();
  s.emu.configure({ faults: { outageUntil: downAt + OUTAGE_MS } });
  await Bun.sleep(OUTAGE_MS);
  const atRecovery = submissions();
  // A took nothing while down (its in.php answered errors); B took the new tasks.
  expect(atRecovery.a).toBe(before.a);
  expect(atRecovery.b - before.b).toBeGreaterThan((RATE * OUTAGE_MS) / 1000 / 2);
  // A back: its breaker's probe closes it, the tasks go to A again.
  await Bun.sleep(8000);
  const mid = submissions();
  await Bun.sleep(4000);
  const after = submissions();
  await l.stop();
  expect(after.a - mid.a).toBeGreaterThan(RATE * 2);
  expect(after.b - mid.b).toBeLessThanOrEqual((after.a - mid.a) / 10);

  // Nothing lost: every accepted task completed.
  const states: Record<string, number> = {};
  for (const { id } of l.acked) {
    const v = await api<TaskView>(s, `/v1/tasks/${id}?wait=30`);
    states[v.body.status] = (states[v.body.status] ?? 0) + 1;
  }
  expect(states).toEqual({ completed: l.acked.length });
  // The tasks accepted while A was down (its breaker open after a few calls) were solved by B.
  const hostB = new URL(b.url).host;
  const during = l.acked.filter((a) => a.at > downAt + 3000 && a.at < downAt + OUTAGE_MS).map((a) => a.id);
  const [atB] = await s.db.sql<{ n: number }[]>`
    select count(*)::int as n from ledger_all where kind = 'charge' and task_id = any(${during}::uuid[]) and provider like ${`${hostB}/%`}`;
  expect(atB!.n).toBe(during.length);
  // No task at two providers at once: one charge per task.
  const [dupes] = await s.db.sql<{ n: number }[]>`
    select count(*)::int as n from (select task_id from ledger_all where kind = 'charge' group by task_id having count(*) > 1) d`;
  expect(dupes!.n).toBe(0);
  // The ledger per account equals each emulator's own books, to the micro-dollar.
  const byHost = await s.db.sql<{ host: string; micros: string }[]>`
    select split_part(provider, '/', 1) as host, sum(amount_micros)::text as micros from ledger_all where kind = 'charge' group by 1`;
  const ledger = Object.fromEntries(byHost.map((r) => [r.host, Number(r.micros)]));
  expect(ledger[hostB]).toBe(b.books().totals.chargedMicros);
  expect(ledger[new URL(s.emu.url).host]).toBe(s.emu.books().totals.chargedMicros);
  console.log(
    `[providers] ${l.acked.length} tasks at ${RATE}/s, A down ${OUTAGE_MS / 1000} s: 0 lost; B took ${atRecovery.b - before.b} submissions during the outage (${during.length} tasks accepted then, all solved by B); ` +
      `back on A: ${after.a - mid.a} vs B ${after.b - mid.b} in the last 4 s; ledger A ${ledger[new URL(s.emu.url).host]} µ$ = books, B ${ledger[hostB]} µ$ = books`,
  );
}
