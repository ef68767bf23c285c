// `recovery rewrite-owners` (issue 14.8): rows owned by a key's legacy client id (the sha256
// prefix) rewritten to its peppered id (HMAC-SHA256(API_KEY_PEPPER, key)), in one transaction.
import type postgres from "postgres";

/** Rows changed (or, in a dry run, that would change) per table. */
export interface OwnerCounts {
  tasks: number;
  webhook_deliveries: number;
  /** audit_log entries naming a legacy id in `detail.owner` or `detail.clientId` (none are written today). */
  audit_log: number;
}

export interface RewriteResult {
  applied: boolean;
  /** Keys of API_KEYS (distinct legacy ids) looked for. */
  clients: number;
  counts: OwnerCounts;
}

const AUDIT_FIELDS = ["owner", "clientId"] as const;

/**
 * Rewrites `owner` of `tasks` and `webhook_deliveries` (and client ids in `audit_log` details)
 * from each `from` (legacy id) to its `to` (peppered id), all in one transaction; with `apply`
 * false, counts what would change and changes nothing. Idempotent: a second run finds no legacy
 * owner left (0 rows). Other columns are untouched (no `version`/`updated_at` bump: an owner is no
 * state change, and the stale sweep keys on `updated_at`). Works on the database `sql` is
 * connected to: each region's database (its replicated rows of other regions included) needs its own run.
 */
export async function rewriteOwners(
  sql: postgres.Sql,
  rewrites: ReadonlyArray<{ from: string; to: string }>,
  o: { apply: boolean; actor?: string },
): Promise<RewriteResult> {
  const from = rewrites.map((r) => r.from);
  const to = rewrites.map((r) => r.to);
  const counts = await sql.begin(async (tx) => {
    const map = () => tx`(select * from unnest(${from}::text[], ${to}::text[]) as m(legacy, peppered))`;
    if (!o.apply) {
      const [t] = await tx<{ n: number }[]>`select count(*)::int as n from tasks where owner = any(${from}::text[])`;
      const [w] = await tx<
        { n: number }[]
      >`select count(*)::int as n from webhook_deliveries where owner = any(${from}::text[])`;
      const [a] = await tx<
        { n: number }[]
      >`select count(*)::int as n from audit_log where detail->>'owner' = any(${from}::text[]) or detail->>'clientId' = any(${from}::text[])`;
      return { tasks: t!.n, webhook_deliveries: w!.n, audit_log: a!.n };
    }
    const tasks = await tx`update tasks t set owner = m.peppered from ${map()} m where t.owner = m.legacy`;
    const deliveries =
      await tx`update webhook_deliveries d set owner = m.peppered from ${map()} m where d.owner = m.legacy`;
    const audited = new Set<number>();
    for (const field of AUDIT_FIELDS) {
      const rows = await tx<
        { id: number }[]
      >`update audit_log a set detail = jsonb_set(a.detail, ${[field]}::text[], to_jsonb(m.peppered)) from ${map()} m where a.detail->>${field} = m.legacy returning a.id`;
      for (const r of rows) audited.add(Number(r.id));
    }
    const c = { tasks: tasks.count, webhook_deliveries: deliveries.count, audit_log: audited.size };
    // The rewrite itself is audited (counts only: no id, no key), when it changed anything.
    if (c.tasks + c.webhook_deliveries + c.audit_log > 0)
      await tx`insert into audit_log (actor, action, detail) values (${o.actor ?? "recovery"}, 'owners.rewrite', ${JSON.stringify({ ...c, clients: rewrites.length })}::text::jsonb)`;
    return c;
  });
  return { applied: o.apply, clients: rewrites.length, counts };
}
