import postgres from "postgres";
import { adminStatement, withDatabase } from "../adapters/pg-tools.ts";
import { checkIntegrity, type Snapshot } from "./manifest.ts";
import { restoreSnapshot } from "./restore.ts";

export interface VerifyReport {
  snapshot: string;
  checksum: "ok";
  tables: Record<string, number>;
  ms: number;
}

/**
 * Checks a snapshot end to end: its checksum, then a real `pg_restore` into a scratch database
 * on the server of `serverUrl`, row counts per table, and the scratch database dropped again
 * (also on failure). Never touches EVENTS or the live database.
 */
export async function verifySnapshot(s: Snapshot, serverUrl: string): Promise<VerifyReport> {
  const started = Date.now();
  await checkIntegrity(s);
  const scratch = `verify_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  await adminStatement(serverUrl, "create", scratch);
  try {
    const url = withDatabase(serverUrl, scratch);
    await restoreSnapshot({ snapshot: s, intoUrl: url });
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const tables = await sql<
        { name: string }[]
      >`select table_schema || '.' || table_name as name from information_schema.tables where table_schema not in ('pg_catalog', 'information_schema') and table_type = 'BASE TABLE' order by 1`;
      const counts: Record<string, number> = {};
      for (const t of tables) {
        const [schema, table] = t.name.split(".") as [string, string];
        const r = await sql<{ n: number }[]>`select count(*)::int as n from ${sql(schema)}.${sql(table)}`;
        counts[t.name] = r[0]?.n ?? 0;
      }
      if (!("public.tasks" in counts)) throw new Error(`${s.manifest.name}: restored database has no tasks table`);
      return { snapshot: s.manifest.name, checksum: "ok", tables: counts, ms: Date.now() - started };
    } finally {
      await sql.end({ timeout: 5 });
    }
  } finally {
    await adminStatement(serverUrl, "drop", scratch);
  }
}
