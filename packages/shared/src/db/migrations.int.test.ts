// `migrateDatabase` against a real Postgres: from nothing, twice, and from several migrators at once.
import { afterAll, describe, expect, test } from "bun:test";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import postgres from "postgres";
import { migrateDatabase, migrationMetas } from "./migrations.ts";

const dbs: TestDatabase[] = [];
afterAll(async () => {
  for (const d of dbs) await d.drop();
});

async function freshDb(): Promise<TestDatabase> {
  const d = await createTestDatabase("mig", undefined, { migrate: false });
  dbs.push(d);
  return d;
}

async function tables(url: string): Promise<{ migrations: number; tasks: boolean }> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [m] = await sql<{ n: number }[]>`select count(*)::int as n from drizzle.__drizzle_migrations`;
    const [t] = await sql<{ ok: boolean }[]>`select to_regclass('public.tasks') is not null as ok`;
    return { migrations: m!.n, tasks: t!.ok };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

describe("migrateDatabase", () => {
  test("applies every migration to an empty database, then finds nothing to do", async () => {
    const d = await freshDb();
    const first = await migrateDatabase(d.url);
    expect(first.applied.length).toBe(migrationMetas().length);
    expect(first.total).toBe(migrationMetas().length);
    const second = await migrateDatabase(d.url);
    expect(second.applied).toEqual([]);
    expect(await tables(d.url)).toEqual({ migrations: migrationMetas().length, tasks: true });
  });

  test("four migrators at once on an empty database: one applies, the others wait and find nothing", async () => {
    const d = await freshDb();
    const reports = await Promise.all([1, 2, 3, 4].map(() => migrateDatabase(d.url)));
    const appliers = reports.filter((r) => r.applied.length > 0);
    expect(appliers.length).toBe(1);
    expect(appliers[0]!.applied.length).toBe(migrationMetas().length);
    expect(reports.every((r) => r.total === migrationMetas().length)).toBe(true);
    expect(await tables(d.url)).toEqual({ migrations: migrationMetas().length, tasks: true });
  });

  test("without the lock, concurrent migrators collide (what the lock is for)", async () => {
    const d = await freshDb();
    // Each migrator takes its own lock key, so none waits for another: the unguarded case.
    const results = await Promise.allSettled([1, 2, 3, 4].map((i) => migrateDatabase(d.url, { lockKey: 1000 + i })));
    const failed = results.filter((r) => r.status === "rejected").length;
    const rows = (await tables(d.url).catch(() => ({ migrations: -1, tasks: false }))).migrations;
    // Either a migrator failed, or the journal holds duplicates: something went wrong either way.
    expect(failed > 0 || rows > migrationMetas().length).toBe(true);
  });
});
