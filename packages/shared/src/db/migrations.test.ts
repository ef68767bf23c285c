import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { readMigrationFiles } from "drizzle-orm/migrator";
import { migrationMetas } from "./migrations.ts";

const folder = join(import.meta.dir, "..", "..", "drizzle");

describe("embedded migrations", () => {
  test("are exactly what drizzle-kit generated (run `npm run db:generate` when this fails)", () => {
    const fromFolder = readMigrationFiles({ migrationsFolder: folder });
    expect(migrationMetas()).toEqual(fromFolder);
  });

  test("every .sql file in drizzle/ is in the journal, so none is left out of the binaries", () => {
    const files = readdirSync(folder).filter((f) => f.endsWith(".sql")).length;
    expect(migrationMetas().length).toBe(files);
  });
});
