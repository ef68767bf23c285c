// Applying the schema migrations: the operator step (`recovery migrate`), `npm run dev` and the tests
// all come here. The SQL is embedded (migrations.gen.ts), so a compiled binary migrates with no
// `drizzle/` folder beside it; a Postgres advisory lock makes two hosts running it at once safe.
import { createHash } from "node:crypto";
import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { embeddedMigrations } from "./migrations.gen.ts";
import { applyAppRoles } from "./roles.ts";

/** The advisory lock key every migrator takes (an arbitrary constant: "captcha-pipeline migrate"). */
export const MIGRATION_LOCK_KEY = 7_141_592_653;

/** What drizzle's migrator expects per migration (the shape its `readMigrationFiles` returns). */
export interface MigrationMeta {
  sql: string[];
  bps: boolean;
  folderMillis: number;
  hash: string;
}

/** The embedded migrations as drizzle's migrator reads them from a folder (same split, same hash). */
export function migrationMetas(list = embeddedMigrations): MigrationMeta[] {
  return list.map((m) => ({
    sql: m.sql.split("--> statement-breakpoint"),
    bps: m.breakpoints,
    folderMillis: m.when,
    hash: createHash("sha256").update(m.sql).digest("hex"),
  }));
}

export interface MigrationReport {
  /** Migrations this run applied, by tag. */
  applied: string[];
  /** How many the database holds now. */
  total: number;
  /** Milliseconds spent waiting for another migrator's lock. */
  waitedMs: number;
}

/**
 * Applies every pending migration to the database at `url`, under a session advisory lock so a
 * second migrator (another host, another process) waits and then finds nothing to do, then the
 * app roles' grants (roles.ts: pipeline_gateway, pipeline_solver, pipeline_rollout). Idempotent.
 * Run it as the owner of the database (pipeline_owner), never as an app's role.
 */
export async function migrateDatabase(url: string, opts: { lockKey?: number } = {}): Promise<MigrationReport> {
  const sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    connection: { application_name: "captcha-pipeline migrate" },
  });
  const key = opts.lockKey ?? MIGRATION_LOCK_KEY;
  try {
    const t0 = Date.now();
    await sql`select pg_advisory_lock(${key})`;
    const waitedMs = Date.now() - t0;
    try {
      const before = await appliedMillis(sql);
      const db = drizzle(sql) as unknown as {
        dialect: { migrate(m: MigrationMeta[], s: unknown, c: object): Promise<void> };
        session: unknown;
      };
      await db.dialect.migrate(migrationMetas(), db.session, {});
      // Each app's role and exactly its grants (roles.ts), on every run: idempotent.
      await applyAppRoles(sql);
      const after = await appliedMillis(sql);
      const applied = embeddedMigrations.filter((m) => after.has(m.when) && !before.has(m.when)).map((m) => m.tag);
      return { applied, total: after.size, waitedMs };
    } finally {
      await sql`select pg_advisory_unlock(${key})`;
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function appliedMillis(sql: postgres.Sql): Promise<Set<number>> {
  const [t] = await sql<
    { exists: boolean }[]
  >`select to_regclass('drizzle.__drizzle_migrations') is not null as exists`;
  if (!t?.exists) return new Set();
  const rows = await sql<{ created_at: string }[]>`select created_at from drizzle.__drizzle_migrations`;
  return new Set(rows.map((r) => Number(r.created_at)));
}
