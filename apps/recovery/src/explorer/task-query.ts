// The task explorer's one query, shared by the console (GET /console/api/tasks) and the CLI
// (`recovery tasks`): filters, a search, and keyset pagination on (created_at, id), newest first.
// Never OFFSET, never EVENTS: each page is one indexed read of `tasks` (migration 0013_task_explorer
// adds the indexes), the solver version a semi-join on the ledger (by version, or by its primary key) (the tasks table
// does not record which version solved a task; the ledger does, per charged task).
import { Priority, TaskState, TaskType } from "@pipeline/shared/schemas";
import type postgres from "postgres";
import { z } from "zod";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DURATION = /^(\d{1,6})([smhd])$/;
const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** A time bound: an ISO date or date-time, or a duration back from now (`15m`, `2h`, `7d`). */
const TimeBound = z
  .string()
  .trim()
  .refine((s) => DURATION.test(s) || !Number.isNaN(Date.parse(s)), {
    message: "an ISO date-time (2026-12-06T10:00:00Z) or a duration back from now (15m, 2h, 7d)",
  });

/** Where the previous page stopped: `<created_at in epoch microseconds>_<task id>` (the `next` of a page). */
const Cursor = z
  .string()
  .regex(
    /^\d{1,17}_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
    "the `next` value of the previous page",
  );

const Name = z
  .string()
  .trim()
  .min(1)
  .max(128)
  .regex(/^[\x21-\x7e]+$/, "printable characters without spaces");

export const MAX_PAGE = 200;

/** The explorer's filters as they arrive (a URL's query or the CLI's options); unknown fields refused. */
export const TaskListQuery = z
  .object({
    /** The row's state (a client's `expired` is a `completed` row whose token is past its expiry). */
    state: TaskState.optional(),
    /** The client: the task's owner. */
    client: Name.optional(),
    type: TaskType.optional(),
    priority: Priority.optional(),
    region: z
      .string()
      .regex(/^[a-z0-9][a-z0-9_-]{0,31}$/, "a region name")
      .optional(),
    /** Tasks charged by this solver version (ledger.solver_version). */
    solverVersion: Name.optional(),
    /** created_at at or after. */
    from: TimeBound.optional(),
    /** created_at before. */
    to: TimeBound.optional(),
    /** A task id, an idempotency key, a sitekey, or the start of a pageurl (with or without its scheme). */
    search: z.string().trim().min(1).max(2048).optional(),
    limit: z.coerce.number().int().min(1).max(MAX_PAGE).default(50),
    after: Cursor.optional(),
  })
  .strict();
export type TaskListQuery = z.infer<typeof TaskListQuery>;

/** Parses a query; the error names each field at fault (`limit: Too big: expected number to be <=200`). */
export function parseTaskListQuery(
  input: Record<string, unknown>,
): { ok: true; query: TaskListQuery } | { ok: false; error: string; fields: string[] } {
  // An empty form field means "any".
  const cleaned = Object.fromEntries(Object.entries(input).filter(([, v]) => v !== "" && v !== undefined));
  const r = TaskListQuery.safeParse(cleaned);
  if (r.success) return { ok: true, query: r.data };
  const fields: string[] = [];
  const error = r.error.issues
    .map((i) => {
      if (i.code === "unrecognized_keys") {
        fields.push(...i.keys);
        return `unknown field ${i.keys.join(", ")}`;
      }
      const f = i.path.join(".") || "query";
      fields.push(f);
      return `${f}: ${i.message}`;
    })
    .join("; ");
  return { ok: false, error, fields: [...new Set(fields)] };
}

/** A bound as a Date: a duration is counted back from `now`. */
export function resolveBound(s: string, now: number): Date {
  const m = DURATION.exec(s);
  return m ? new Date(now - Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS]) : new Date(s);
}

export interface TaskListRow {
  id: string;
  client: string;
  type: string;
  priority: string;
  region: string;
  state: string;
  createdAt: string;
  completedAt: string | null;
  attempts: number;
  errorCode: string | null;
  idempotencyKey: string | null;
  /** Null once retention erased the task's params (TASK_RETENTION_DAYS after it finished). */
  pageurl: string | null;
  sitekey: string | null;
  /** The version of the solver that charged it (the ledger's newest charge), null when never charged. */
  solverVersion: string | null;
}

export interface TaskListPage {
  rows: TaskListRow[];
  /** Pass as `after` for the next (older) page; null on the last page. */
  next: string | null;
}

/** The smallest string above every string that starts with `p` (for a prefix range on a text_pattern_ops index). */
function prefixEnd(p: string): string {
  const last = p.codePointAt(p.length - 1)!;
  // Nothing sorts above U+10FFFF: the range then ends at that character repeated (no crash on odd input).
  if (last >= 0x10ffff) return `${p}\u{10FFFF}`;
  const head = p.slice(0, p.length - String.fromCodePoint(last).length);
  return head + String.fromCodePoint(last + 1);
}

/**
 * The search as indexed lookups, one per branch: an id (primary key), an idempotency key, a
 * sitekey (equal), a pageurl that starts with the text (with `https://` and `http://` in front when
 * it has no scheme). listTasks runs each branch as its own select (a UNION), so each one reads
 * its own index range; an OR of them would let the planner walk created_at and filter instead.
 */
function searchBranches(sql: postgres.Sql, s: string): postgres.PendingQuery<postgres.Row[]>[] {
  const url = (p: string) => sql`t.params->>'pageurl' ~>=~ ${p} and t.params->>'pageurl' ~<~ ${prefixEnd(p)}`;
  const urls = /^https?:\/\//i.test(s) ? [url(s)] : [url(`https://${s}`), url(`http://${s}`)];
  return [
    ...(UUID.test(s) ? [sql`t.id = ${s.toLowerCase()}`] : []),
    sql`t.idempotency_key = ${s}`,
    sql`t.params->>'sitekey' = ${s}`,
    ...urls,
  ];
}

/** The WHERE conditions of a query but its search (each one names an indexed column, or the ledger's version index). */
function conditions(sql: postgres.Sql, q: TaskListQuery, now: number): postgres.PendingQuery<postgres.Row[]>[] {
  const c: postgres.PendingQuery<postgres.Row[]>[] = [];
  if (q.state) c.push(sql`t.state = ${q.state}`);
  if (q.client) c.push(sql`t.owner = ${q.client}`);
  if (q.type) c.push(sql`t.type = ${q.type}`);
  if (q.priority) c.push(sql`t.priority = ${q.priority}`);
  if (q.region) c.push(sql`t.region = ${q.region}`);
  if (q.solverVersion)
    c.push(
      // An IN, not an EXISTS per row: the planner may start from the ledger's version index when the version is rare.
      sql`t.id in (select l.task_id from ledger_all l where l.solver_version = ${q.solverVersion} and l.kind = 'charge')`,
    );
  // As text: drizzle, sharing the pool (openDatabase), turns postgres.js's Date serializer off.
  if (q.from) c.push(sql`t.created_at >= ${resolveBound(q.from, now).toISOString()}::timestamptz`);
  if (q.to) c.push(sql`t.created_at < ${resolveBound(q.to, now).toISOString()}::timestamptz`);
  if (q.after) {
    const cut = q.after.indexOf("_");
    const micros = q.after.slice(0, cut);
    // Microseconds as an integer, never through a double: the cursor lands exactly on the row it names.
    c.push(
      sql`(t.created_at, t.id) < (timestamptz 'epoch' + ${micros}::bigint * interval '1 microsecond', ${q.after.slice(cut + 1).toLowerCase()}::uuid)`,
    );
  }
  return c;
}

interface Raw {
  id: string;
  owner: string;
  type: string;
  priority: string;
  region: string;
  state: string;
  created_at: Date;
  created_us: string;
  completed_at: Date | null;
  attempts: number;
  error_code: string | null;
  idempotency_key: string | null;
  pageurl: string | null;
  sitekey: string | null;
  solver_version: string | null;
}

/**
 * `select id, created_at` of every task that matches `q` (its filters, its search, its `after`; not
 * its limit): a page's keys, and the set a bulk action (apps/recovery/src/bulk) counts and walks.
 * With a search: the union of the branches (each an index range).
 */
export function matchingKeys(sql: postgres.Sql, q: TaskListQuery, now: number): postgres.PendingQuery<postgres.Row[]> {
  const and = (xs: postgres.PendingQuery<postgres.Row[]>[]) =>
    xs.length ? xs.reduce((a, b) => sql`${a} and ${b}`) : sql`true`;
  const conds = conditions(sql, q, now);
  return q.search
    ? searchBranches(sql, q.search)
        .map((b) => sql`select t.id, t.created_at from tasks t where ${and([...conds, b])}`)
        .reduce((a, b) => sql`${a} union ${b}`)
    : sql`select t.id, t.created_at from tasks t where ${and(conds)}`;
}

/**
 * One page of tasks, newest first (created_at, then id), that match every filter of `q`; `next`
 * continues after its last row. A page reads at most `limit + 1` rows of an index range.
 */
export async function listTasks(sql: postgres.Sql, q: TaskListQuery, now = Date.now()): Promise<TaskListPage> {
  const limit = q.limit + 1;
  const keys = matchingKeys(sql, q, now);
  const raw = await sql<Raw[]>`
    with page as (${keys} order by created_at desc, id desc limit ${limit})
    select t.id, t.owner, t.type, t.priority, t.region, t.state, t.created_at,
           (extract(epoch from t.created_at) * 1000000)::bigint::text as created_us,
           t.completed_at, t.attempts, t.error_code, t.idempotency_key,
           t.params->>'pageurl' as pageurl, t.params->>'sitekey' as sitekey,
           (select l.solver_version from ledger_all l where l.task_id = t.id and l.kind = 'charge'
             order by l.created_at desc limit 1) as solver_version
    from page p join tasks t on t.id = p.id
    order by t.created_at desc, t.id desc`;
  const page = raw.slice(0, q.limit);
  const last = page.at(-1);
  return {
    rows: page.map((r) => ({
      id: r.id,
      client: r.owner,
      type: r.type,
      priority: r.priority,
      region: r.region,
      state: r.state,
      createdAt: new Date(r.created_at).toISOString(),
      completedAt: r.completed_at ? new Date(r.completed_at).toISOString() : null,
      attempts: r.attempts,
      errorCode: r.error_code,
      idempotencyKey: r.idempotency_key,
      pageurl: r.pageurl,
      sitekey: r.sitekey,
      solverVersion: r.solver_version,
    })),
    next: raw.length > q.limit && last ? `${last.created_us}_${last.id}` : null,
  };
}
