// Each fence of `npm run lint` fails on a planted violation: a file written into the tree for the
// length of one check (Biome reads it where it stands, so its folder's rules apply), then removed.
import { afterEach, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FACTORY_MAX, longFunctions } from "./long-functions.ts";

const root = join(import.meta.dir, "..", "..");
const planted: string[] = [];
afterEach(() => {
  for (const f of planted.splice(0)) rmSync(join(root, f), { force: true });
});

/** Biome's check of one planted file: its exit code and what it printed. */
function plant(path: string, text: string): { code: number | null; out: string } {
  planted.push(path);
  writeFileSync(join(root, path), text);
  const r = spawnSync(join(root, "node_modules", ".bin", "biome"), ["check", "--colors=off", path], {
    cwd: root,
    encoding: "utf8",
  });
  return { code: r.status, out: r.stdout + r.stderr };
}

const tag = `planted-${process.pid}`;

test("tests/ importing an app's internals fails", () => {
  const r = plant(
    `tests/${tag}.ts`,
    'import { loadConfig } from "../apps/gateway/src/config.ts";\n\nexport const x = loadConfig;\n',
  );
  expect(r.code).not.toBe(0);
  expect(r.out).toContain("tests/ runs the apps as processes");
});

test("an unformatted file fails", () => {
  const r = plant(`infra/${tag}.ts`, "export const  x = {a:1,\n b: 2}\n");
  expect(r.code).not.toBe(0);
  expect(r.out).toContain("format");
});

test("an `export *` barrel fails", () => {
  const r = plant(`packages/shared/src/${tag}.ts`, 'export * from "./config.ts";\n');
  expect(r.code).not.toBe(0);
  expect(r.out).toContain("noReExportAll");
});

test("a domain/ file importing an adapter, or an I/O library, fails", () => {
  const adapter = plant(
    `apps/rollout/src/domain/${tag}.ts`,
    'import { openControlBucket } from "../adapters/store.ts";\n\nexport const x = openControlBucket;\n',
  );
  expect(adapter.code).not.toBe(0);
  expect(adapter.out).toContain("domain/ is pure");
  const io = plant(
    `apps/solver/src/domain/${tag}.ts`,
    'import postgres from "postgres";\n\nexport const x = postgres;\n',
  );
  expect(io.code).not.toBe(0);
  expect(io.out).toContain("domain/ does no I/O");
});

test("one app importing another fails", () => {
  const r = plant(
    `apps/solver/src/${tag}.ts`,
    'import { loadConfig } from "../../gateway/src/config.ts";\n\nexport const x = loadConfig;\n',
  );
  expect(r.code).not.toBe(0);
  expect(r.out).toContain("no app imports another");
});

test("the length ratchet: a function over 80 lines, a factory over 120", () => {
  const body = (n: number) => Array.from({ length: n - 2 }, (_, i) => `  const v${i} = ${i};`).join("\n");
  const fn = (name: string, lines: number) => `export function ${name}() {\n${body(lines)}\n}\n`;
  expect(longFunctions("x.ts", fn("plain", 80), 80)).toEqual([]);
  expect(longFunctions("x.ts", fn("plain", 81), 80).map((f) => f.lines)).toEqual([81]);
  expect(longFunctions("x.ts", fn("createThing", FACTORY_MAX), 80)).toEqual([]);
  expect(longFunctions("x.ts", fn("createThing", FACTORY_MAX + 1), 80).map((f) => f.name)).toEqual(["createThing"]);
});
