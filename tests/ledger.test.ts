// The operator's money, end to end: every answer the provider charged is one ledger entry with the
// provider's own price, so the ledger's spend equals the emulator's books to the micro-dollar; and
// reports (facade and REST) are forwarded once, by a solver, and a bad one's refund lands in both.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { TaskSpec, TaskView } from "@pipeline/shared/schemas";
import { api, type Stack, startStack } from "./harness.ts";

const OTHER_KEY = "e2e-client-key-0002";
let s: Stack;
beforeAll(async () => {
  s = await startStack({
    region: "ledger",
    emulator: { latencyMs: 20 },
    gatewayEnv: { API_KEYS: `e2e-client-key-0001,${OTHER_KEY}` },
  });
}, 60_000);
afterAll(() => s?.stop(), 30_000);

/** Task i of a mixed set, each with params of its own. */
function spec(i: number): TaskSpec {
  const pageurl = `https://shop.example.com/ledger/${i}`;
  switch (i % 4) {
    case 0:
      return { type: "recaptcha_v2", params: { sitekey: "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", pageurl } };
    case 1:
      return { type: "turnstile", params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl } };
    case 2:
      return {
        type: "geetest",
        params: { gt: "81388ea1fc187e0c335c0a8907ff2625", challenge: `c${i.toString(16).padStart(31, "0")}`, pageurl },
      };
    default:
      return { type: "image", params: { body: Buffer.from(`ledger image ${i}`).toString("base64"), numeric: 1 } };
  }
}

/** Submits and waits for each task; returns the ids of the completed ones. */
async function solveAll(n: number, key = s.apiKey): Promise<string[]> {
  const ids = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const res = await fetch(`${s.gatewayUrl}/v1/tasks`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(spec(i)),
      });
      expect(res.status).toBe(202);
      return ((await res.json()) as { id: string }).id;
    }),
  );
  for (const id of ids) {
    const res = await fetch(`${s.gatewayUrl}/v1/tasks/${id}?wait=30`, { headers: { authorization: `Bearer ${key}` } });
    expect(((await res.json()) as TaskView).status).toBe("completed");
  }
  return ids;
}

const ledgerSum = async (kind: "charge" | "refund") =>
  Number(
    (
      await s.db.sql<
        { s: string }[]
      >`select coalesce(sum(amount_micros), 0)::text as s from ledger_all where kind = ${kind}`
    )[0]!.s,
  );

let solved: string[] = [];

test("40 solved tasks of four types: one charge each at the provider's price, the ledger's total equals the emulator's books exactly", async () => {
  solved = await solveAll(40);
  const books = s.emu.books();
  expect(books.totals.charges).toBe(40);
  const rows = await s.db.sql<{ n: number; sources: string[]; owners: number }[]>`
    select count(*)::int as n, array_agg(distinct price_source) as sources, count(distinct owner)::int as owners
    from ledger_all where kind = 'charge'`;
  expect(rows[0]!.n).toBe(40);
  expect(rows[0]!.sources).toEqual(["provider"]);
  expect(rows[0]!.owners).toBe(1);
  expect(await ledgerSum("charge")).toBe(books.totals.chargedMicros);
  // Every solved task is charged once, by its own provider task.
  const perTask = await s.db.sql<{ n: number }[]>`
    select count(*)::int as n from ledger_all l join tasks t on t.id = l.task_id and t.provider_id = l.provider_task_id
    where l.kind = 'charge' and l.task_id = any(${solved}::uuid[])`;
  expect(perTask[0]!.n).toBe(40);
  // The books as the control API shows them agree.
  const viaHttp = (await (await fetch(`${s.emu.url}/emulator/books`)).json()) as typeof books;
  expect(viaHttp.totals.chargedMicros).toBe(books.totals.chargedMicros);
}, 90_000);

/** A res.php call to the gateway's facade (JSON replies). */
async function facade(key: string, params: Record<string, string>): Promise<{ status: number; request: string }> {
  const res = await fetch(`${s.gatewayUrl}/res.php`, {
    method: "POST",
    body: new URLSearchParams({ key, json: "1", ...params }),
  });
  return (await res.json()) as { status: number; request: string };
}

async function report(id: string, body: unknown, key = s.apiKey) {
  const res = await fetch(`${s.gatewayUrl}/v1/tasks/${id}/report`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function until(what: string, check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(100);
  }
}

test("reportbad on 10 solved tasks (facade and REST): forwarded once each, 10 refunds in the ledger and in the emulator's books, to the micro-dollar", async () => {
  const bad = solved.slice(0, 10);
  for (const id of bad.slice(0, 5))
    expect(await facade(s.apiKey, { action: "reportbad", id })).toEqual({ status: 1, request: "OK_REPORT_RECORDED" });
  for (const id of bad.slice(5)) expect((await report(id, { accepted: false })).status).toBe(202);
  // A good report is forwarded too, and refunds nothing.
  expect((await report(solved[10]!, { accepted: true })).status).toBe(202);

  const refunds = async () =>
    (await s.db.sql<{ n: number }[]>`select count(*)::int as n from ledger_all where kind = 'refund'`)[0]!.n;
  await until("10 refunds in the ledger", async () => (await refunds()) >= 10);
  await until("the good report sent", async () => s.emu.stats().reports.good === 1);
  await Bun.sleep(300);
  expect(await refunds()).toBe(10);
  const books = s.emu.books();
  expect(s.emu.stats().reports).toEqual({ bad: 10, good: 1 });
  expect(books.totals.refunds).toBe(10);
  expect(-(await ledgerSum("refund"))).toBe(books.totals.refundedMicros);
  expect((await ledgerSum("charge")) + (await ledgerSum("refund"))).toBe(
    books.totals.chargedMicros - books.totals.refundedMicros,
  );
  const refunded = await s.db.sql<
    { task_id: string }[]
  >`select task_id from ledger_all where kind = 'refund' order by task_id`;
  expect(refunded.map((r) => r.task_id)).toEqual([...bad].sort());
  const states = await s.db.sql<
    { state: string; n: number }[]
  >`select state, count(*)::int as n from task_reports group by state`;
  expect([...states]).toEqual([{ state: "sent", n: 11 }]);

  // The client's usage shows the ledger's spend (charged less refunded).
  const usage = await api<{ spend: { source: string; today: { netMicros: number; refunds: number } } }>(s, "/v1/usage");
  expect(usage.body.spend.source).toBe("ledger");
  expect(usage.body.spend.today.netMicros).toBe(books.totals.chargedMicros - books.totals.refundedMicros);
  expect(usage.body.spend.today.refunds).toBe(10);
}, 60_000);

test("a second report of the same task is refused (409 on REST, ERROR_DUPLICATE_REPORT on the facade) and not forwarded", async () => {
  const [viaFacade, viaRest] = [solved[0]!, solved[5]!];
  expect(await facade(s.apiKey, { action: "reportgood", id: viaFacade })).toEqual({
    status: 0,
    request: "ERROR_DUPLICATE_REPORT",
  });
  expect(await facade(s.apiKey, { action: "reportbad", id: viaRest })).toEqual({
    status: 0,
    request: "ERROR_DUPLICATE_REPORT",
  });
  const again = await report(viaRest, { accepted: true });
  expect(again.status).toBe(409);
  expect(again.body.title).toBe("Already Reported");
  expect((await report(viaFacade, { accepted: false })).status).toBe(409);
  await Bun.sleep(500);
  expect(s.emu.stats().reports).toEqual({ bad: 10, good: 1 });
});

test("a report of another client's task is 404 (facade: ERROR_WRONG_CAPTCHA_ID) and nothing is stored or forwarded", async () => {
  const theirs = solved[20]!;
  const r = await report(theirs, { accepted: false }, OTHER_KEY);
  expect(r.status).toBe(404);
  expect(await facade(OTHER_KEY, { action: "reportbad", id: theirs })).toEqual({
    status: 0,
    request: "ERROR_WRONG_CAPTCHA_ID",
  });
  const rows = await s.db.sql<{ n: number }[]>`select count(*)::int as n from task_reports where task_id = ${theirs}`;
  expect(rows[0]!.n).toBe(0);
  await Bun.sleep(300);
  expect(s.emu.stats().reports).toEqual({ bad: 10, good: 1 });
});

test("a report body that is not {accepted: boolean} is a 400 naming the field; an unsolved task cannot be reported", async () => {
  const r = await report(solved[30]!, { accepted: "yes" });
  expect(r.status).toBe(400);
  expect(JSON.stringify(r.body.errors)).toContain("accepted");
  expect((await report(solved[30]!, { accepted: true, extra: 1 })).status).toBe(400);
  const unknown = await report("0190a000-0000-7000-8000-000000000000", { accepted: true });
  expect(unknown.status).toBe(404);
});
