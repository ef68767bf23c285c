import { expect, test } from "bun:test";
import { join } from "node:path";
import { devToolingImports, productionSources } from "./devstack-fence.ts";

const root = join(import.meta.dir, "..", "..");
const file = join(root, "apps", "recovery", "src", "adapters", "x.ts");

test("every spelling of an import of the dev tooling is a breach", () => {
  const text = [
    `import { findPostgres } from "@pipeline/devstack";`,
    `import type { TestNats } from "@pipeline/devstack/testing";`,
    `export { freePort } from "@pipeline/devstack";`,
    `const m = await import("@pipeline/devstack");`,
    `import { startPostgres } from "../../../../packages/devstack/src/postgres.ts";`,
    `import { createTestDatabase } from "@pipeline/shared/testing";`,
    `import { harness } from "../testing/harness.ts";`,
  ].join("\n");
  expect(devToolingImports(file, text, root).map((b) => b.line)).toEqual([1, 2, 3, 4, 5, 6, 7]);
});

test("what production may import passes", () => {
  const text = [
    `import { findPgClientTools } from "@pipeline/shared/host-binaries";`,
    `import { readDevStack } from "@pipeline/shared/dev-stack-file";`,
    `import { x } from "./devstack-notes.ts";`,
  ].join("\n");
  expect(devToolingImports(file, text, root)).toEqual([]);
});

test("production is apps' and packages' sources, less tests, testing/ folders and devstack itself", () => {
  const files = productionSources(root).map((f) => f.slice(root.length + 1));
  expect(files).toContain("apps/recovery/src/adapters/pg-tools.ts");
  expect(files).toContain("packages/shared/src/host-binaries.ts");
  expect(
    files.some((f) => f.endsWith(".test.ts") || f.includes("/testing/") || f.startsWith("packages/devstack/")),
  ).toBe(false);
});
