// The task explorer's query against real Postgres (20,000 seeded rows): for each filter and each
// kind of search, paging through every page returns each matching row exactly once, as many as a
// plain SQL count finds; a bad query names the field at fault.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { createTestDatabase, seedTasks, type TestDatabase } from "@pipeline/devstack/testing";
import postgres from "postgres";
import { listTasks, parseTaskListQuery, type TaskListQuery } from "./task-query.ts";

const ROWS = 20_000;
const NOW = Date.UTC(2026, 11, 6, 12, 0, 0);
let tdb: TestDatabase;
let sql: postgres.Sql;
let someId = "";

beforeAll(async () => {
  tdb = await createTestDatabase("explorer");
  sql = postgres(tdb.url, { max: 2, onnotice: () => {} });
  // 10,000 distinct created_at values, one every minute back from NOW, two rows on each.
  await seedTasks(sql, { rows: ROWS, newest: NOW, stepMs: 60_000 });
  someId = (await sql<{ id: string }[]>`select id from tasks where state = 'failed' limit 1`)[0]!.id;
}, 60_000);
afterAll(async () => {
  await sql?.end({ timeout: 5 });
  await tdb?.drop();
});

const query = (input: Record<string, unknown>): TaskListQuery => {
  const r = parseTaskListQuery(input);
  if (!r.ok) throw new Error(r.error);
  return r.query;
};

/** Every page of a query, in order: the ids, and whether each page was in (created_at, id) descending order. */
async function everyPage(input: Record<string, unknown>) {
  const ids: string[] = [];
  let after: string | null = null;
  let pages = 0;
  let ordered = true;
  do {
    const page = await listTasks(sql, query({ ...input, limit: 200, ...(after ? { after } : {}) }), NOW);
    for (let i = 1; i < page.rows.length; i++) {
      const [a, b] = [page.rows[i - 1]!, page.rows[i]!];
      if (a.createdAt < b.createdAt || (a.createdAt === b.createdAt && a.id < b.id)) ordered = false;
    }
    ids.push(...page.rows.map((r) => r.id));
    after = page.next;
    pages++;
  } while (after && pages < 1000);
  return { ids, pages, ordered };
}

const count = async (where: postgres.PendingQuery<postgres.Row[]>) =>
  (await sql<{ n: number }[]>`select count(*)::int as n from tasks t where ${where}`)[0]!.n;

const hour = 3_600_000;
const cases: Array<[string, Record<string, unknown>, () => postgres.PendingQuery<postgres.Row[]>]> = [
  ["no filter", {}, () => sql`true`],
  ["state", { state: "failed" }, () => sql`state = 'failed'`],
  ["client", { client: "client-7" }, () => sql`owner = 'client-7'`],
  ["type", { type: "geetest" }, () => sql`type = 'geetest'`],
  ["priority", { priority: "high" }, () => sql`priority = 'high'`],
  ["region", { region: "hel1" }, () => sql`region = 'hel1'`],
  [
    "solver version",
    { solverVersion: "v2" },
    () => sql`id in (select task_id from ledger_all where solver_version = 'v2' and kind = 'charge')`,
  ],
  [
    "time range",
    { from: new Date(NOW - 30 * hour).toISOString(), to: new Date(NOW - 20 * hour).toISOString() },
    () => sql`created_at >= ${new Date(NOW - 30 * hour)} and created_at < ${new Date(NOW - 20 * hour)}`,
  ],
  ["since a duration", { from: "12h" }, () => sql`created_at >= ${new Date(NOW - 12 * hour)}`],
  ["search: sitekey", { search: "sk-42" }, () => sql`params->>'sitekey' = 'sk-42'`],
  [
    "search: host of a pageurl",
    { search: "site7.example.com" },
    () => sql`params->>'pageurl' like 'https://site7.example.com%'`,
  ],
  [
    "search: pageurl prefix",
    { search: "https://site7.example.com/p/1" },
    () => sql`params->>'pageurl' like 'https://site7.example.com/p/1%'`,
  ],
  ["search: idempotency key", { search: "idem-400" }, () => sql`idempotency_key = 'idem-400'`],
  [
    "filters together",
    { state: "completed", client: "client-3", type: "turnstile", region: "nbg1" },
    () => sql`state = 'completed' and owner = 'client-3' and type = 'turnstile' and region = 'nbg1'`,
  ],
];

for (const [name, input, where] of cases)
  test(`explorer, ${name}: every page together hold each matching row once, as many as a plain count`, async () => {
    const { ids, ordered } = await everyPage(input);
    const expected = await count(where());
    expect(expected).toBeGreaterThan(0);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(expected);
    expect(ordered).toBe(true);
  });

test("explorer, search by task id finds that task (also in capitals)", async () => {
  const page = await listTasks(sql, query({ search: someId.toUpperCase() }), NOW);
  expect(page.rows.map((r) => r.id)).toEqual([someId]);
  expect(page.next).toBeNull();
  expect(page.rows[0]!.state).toBe("failed");
});

test("explorer rows carry the solver version of their charge, and no params once retention erased them", async () => {
  const page = await listTasks(sql, query({ state: "completed", limit: 200 }), NOW);
  expect(page.rows.every((r) => r.solverVersion === "v1" || r.solverVersion === "v2")).toBe(true);
  expect(page.rows.some((r) => r.pageurl === null && r.sitekey === null)).toBe(true);
  expect(page.rows.some((r) => r.pageurl?.startsWith("https://site"))).toBe(true);
});

test("a bad explorer query names the field at fault", () => {
  const bad = (input: Record<string, unknown>) => {
    const r = parseTaskListQuery(input);
    return r.ok ? [] : r.fields;
  };
  expect(bad({ limit: "0" })).toEqual(["limit"]);
  expect(bad({ limit: "201" })).toEqual(["limit"]);
  expect(bad({ state: "done" })).toEqual(["state"]);
  expect(bad({ type: "hcaptcha" })).toEqual(["type"]);
  expect(bad({ from: "yesterday" })).toEqual(["from"]);
  expect(bad({ after: "2026-12-06" })).toEqual(["after"]);
  expect(bad({ region: "Bad Region" })).toEqual(["region"]);
  expect(bad({ owner: "x" })).toEqual(["owner"]);
  expect(bad({ state: "", client: "" })).toEqual([]);
});

async function cli(...args: string[]) {
  const p = Bun.spawn([process.execPath, "apps/recovery/src/cli.ts", "tasks", ...args], {
    cwd: join(import.meta.dir, "..", "..", "..", ".."),
    env: { PATH: process.env.PATH ?? "", DATABASE_URL: tdb.url, PIPELINE_ENV: "dev" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { out, err, code };
}

test("`recovery tasks` pages with the same rules: --json pages chain through --after; a bad option is named (exit 2)", async () => {
  const first = await cli("--state", "failed", "--client", "client-36", "--limit", "5", "--json");
  expect(first.code).toBe(0);
  const page = JSON.parse(first.out) as { rows: Array<{ id: string; state: string; client: string }>; next: string };
  expect(page.rows.length).toBe(5);
  expect(page.rows.every((r) => r.state === "failed" && r.client === "client-36")).toBe(true);
  const second = await cli(
    "--state",
    "failed",
    "--client",
    "client-36",
    "--limit",
    "5",
    "--after",
    page.next,
    "--json",
  );
  const ids = (JSON.parse(second.out) as typeof page).rows.map((r) => r.id);
  expect(ids.filter((id) => page.rows.some((r) => r.id === id))).toEqual([]);
  const text = await cli("--search", "idem-400");
  expect(text.code).toBe(0);
  expect(text.out).toContain("no more");
  const bad = await cli("--since", "yesterday");
  expect(bad.code).toBe(2);
  expect(bad.err + bad.out).toContain("--since:");
});

test("a search ending in the highest character is answered, not a crash", async () => {
  const page = await listTasks(sql, query({ search: "site7.example.com/\u{10FFFF}" }), NOW);
  expect(page.rows).toEqual([]);
});
