// The task explorer's queries at scale: seeds a fresh database (its own Postgres cluster in a temp
// folder) with BENCH_EXPLORER_ROWS tasks (1,000,000 by default; one INSERT ... SELECT over
// generate_series, packages/devstack/src/testing/seed-tasks.ts), then times each typical query of
// apps/recovery/src/explorer/task-query.ts (a page of 50, warm, the median of several runs) and
// prints the plan's scans (auto_explain), so a query that falls back to a Seq Scan shows.
// Not part of `npm run bench` nor of the tests:  bun bench/explorer.ts   (about 2 minutes here)
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createTestDatabase, seedTasks } from "@pipeline/devstack/testing";
import postgres from "postgres";
import { listTasks, parseTaskListQuery } from "../apps/recovery/src/explorer/task-query.ts";

const ROWS = Number(process.env.BENCH_EXPLORER_ROWS ?? 1_000_000);
const RUNS = Number(process.env.BENCH_EXPLORER_RUNS ?? 7);
const NOW = Date.now();

/** Notices carry auto_explain's plans; only the scans are kept. */
function scansOf(plan: string): string {
  const scans = [
    ...plan.matchAll(
      /((?:Parallel )?(?:Index Only Scan|Index Scan|Bitmap Index Scan|Seq Scan)(?: Backward)?)(?: using (\S+))? on (\w+)/g,
    ),
  ].map((m) => `${m[1]}${m[2] ? ` ${m[2]}` : ""}${m[2] ? "" : ` on ${m[3]}`}`);
  return [...new Set(scans)].join(", ");
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The typical queries: each filter, a deep page, the kinds of search, and the worst case found. */
function casesOf(midCursor: string, failedId: string): Array<[string, Record<string, unknown>]> {
  return [
    ["first page, no filter", {}],
    ["a page half-way down (keyset)", { after: midCursor }],
    ["state failed (7%)", { state: "failed" }],
    ["state cancelled (2%)", { state: "cancelled" }],
    ["client (2%)", { client: "client-7" }],
    ["type geetest (20%)", { type: "geetest" }],
    ["priority high, region hel1", { priority: "high", region: "hel1" }],
    ["solver version v2 (ledger, 42%)", { solverVersion: "v2" }],
    ["solver version v3 (ledger, 0.1%)", { solverVersion: "v3" }],
    ["solver version that charged nothing", { solverVersion: "v9" }],
    ["last 2 hours", { from: "2h" }],
    ["a 1-hour window 5 days back", { from: "121h", to: "120h" }],
    ["state, client and type", { state: "completed", client: "client-3", type: "turnstile" }],
    ["client and state, none match (worst case)", { client: "client-7", state: "failed" }],
    ["search: task id", { search: failedId }],
    ["search: idempotency key", { search: "idem-400000" }],
    ["search: sitekey (0.1%)", { search: "sk-42" }],
    ["search: host of a pageurl (0.2%)", { search: "site7.example.com" }],
    ["search: full pageurl", { search: "https://site11.example.com/p/500011" }],
    ["search: nothing matches", { search: "nothing.example.org" }],
  ];
}

interface Result {
  query: string;
  rows: number;
  medianMs: number;
  maxMs: number;
  scans: string;
}

/** Each case: one warm-up, RUNS timed runs on `sql`, then one run on `explain` whose plan (auto_explain) lands in `plans`. */
async function timeCases(
  sql: postgres.Sql,
  explain: postgres.Sql,
  plans: string[],
  cases: Array<[string, Record<string, unknown>]>,
): Promise<Result[]> {
  const results: Result[] = [];
  for (const [name, input] of cases) {
    const parsed = parseTaskListQuery(input);
    if (!parsed.ok) throw new Error(`${name}: ${parsed.error}`);
    const q = parsed.query;
    await listTasks(sql, q, NOW);
    const times: number[] = [];
    let rows = 0;
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      rows = (await listTasks(sql, q, NOW)).rows.length;
      times.push(performance.now() - t0);
    }
    plans.length = 0;
    await listTasks(explain, q, NOW);
    const scans = scansOf(plans.join("\n"));
    results.push({ query: name, rows, medianMs: median(times), maxMs: Math.max(...times), scans });
    console.error(`[explorer] ${name}: ${median(times).toFixed(1)} ms`);
  }
  return results;
}

async function main() {
  const tdb = await createTestDatabase("explorer_bench");
  const sql = postgres(tdb.url, { max: 1, onnotice: () => {} });
  const plans: string[] = [];
  const explain = postgres(tdb.url, { max: 1, onnotice: (n) => plans.push(String(n.message)) });
  try {
    console.error(`[explorer] seeding ${ROWS.toLocaleString("en")} tasks ...`);
    const seeded = await seedTasks(sql, { rows: ROWS, newest: NOW, stepMs: 2000 });
    const [sizes] = await sql<{ table: string; indexes: string }[]>`
      select pg_size_pretty(pg_table_size('tasks')) as table, pg_size_pretty(pg_indexes_size('tasks')) as indexes`;
    console.error(
      `[explorer] seeded in ${(seeded.ms / 1000).toFixed(1)} s (tasks ${sizes!.table}, its indexes ${sizes!.indexes})`,
    );
    // A canary: v3 charged one task in a thousand (its newest charge, so the row shows it).
    await sql`update ledger set solver_version = 'v3' where get_byte(uuid_send(task_id), 1) < 1 and get_byte(uuid_send(task_id), 2) < 64`;
    await sql`analyze ledger`;
    // Setup only (never in the explorer): a cursor half-way down, a task id and an idempotency key to look for.
    const [mid] = await sql<{ next: string }[]>`
      select (extract(epoch from created_at) * 1000000)::bigint::text || '_' || id as next
      from tasks order by created_at desc, id desc offset ${Math.floor(ROWS / 2)} limit 1`;
    const [one] = await sql<{ id: string }[]>`select id from tasks where state = 'failed' limit 1`;
    await explain`load 'auto_explain'`;
    await explain`set auto_explain.log_min_duration = 0`;
    await explain`set auto_explain.log_analyze = on`;
    await explain`set auto_explain.log_nested_statements = on`;
    await explain`set client_min_messages = log`;
    const cases = casesOf(mid!.next, one!.id);
    const results = await timeCases(sql, explain, plans, cases);
    const table = [
      `tasks: ${ROWS.toLocaleString("en")} rows (table ${sizes!.table}, indexes ${sizes!.indexes}); a page of 50; median of ${RUNS} warm runs`,
      "",
      "| query | rows | median ms | max ms | plan's scans |",
      "|---|---:|---:|---:|---|",
      ...results.map(
        (r) => `| ${r.query} | ${r.rows} | ${r.medianMs.toFixed(1)} | ${r.maxMs.toFixed(1)} | ${r.scans} |`,
      ),
    ].join("\n");
    console.log(table);
    const dir = join(import.meta.dir, "results");
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `explorer-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
    writeFileSync(file, JSON.stringify({ rows: ROWS, runs: RUNS, seededMs: seeded.ms, sizes, results }, null, 2));
    console.error(`[explorer] ${file}`);
  } finally {
    await explain.end({ timeout: 5 });
    await sql.end({ timeout: 5 });
    await tdb.drop();
  }
}

await main();
process.exit(0);
