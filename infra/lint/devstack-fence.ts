// Production code never loads dev tooling (STYLE.md, "As the house grows"; issue 35): no file the
// apps' or packages' binaries run imports @pipeline/devstack (fetching binaries, local Postgres and
// nats-server, the dev stack's writer, test helpers), nor a `testing/` folder that could. Production
// is apps/*/src and packages/*/src (devstack's own left out), less tests (`*.test.ts`) and test
// support (`testing/` folders). What production needs of the host is @pipeline/shared's:
// `host-binaries` (pg_dump on PATH, nothing installed) and `dev-stack-file` (reading a dev stack's settings).
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";

export interface FenceBreach {
  file: string;
  line: number;
  specifier: string;
}

const DEVSTACK = "@pipeline/devstack";

function walk(dir: string, out: string[]): string[] {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (e === "node_modules" || e === "dist" || e === "testing") continue;
    if (statSync(p).isDirectory()) walk(p, out);
    else if (p.endsWith(".ts") && !p.endsWith(".test.ts") && !p.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

/** The production sources of the repository at `root`. */
export function productionSources(root: string): string[] {
  const out: string[] = [];
  for (const group of ["apps", "packages"]) {
    for (const ws of readdirSync(join(root, group))) {
      if (group === "packages" && ws === "devstack") continue;
      const src = join(root, group, ws, "src");
      if (existsSync(src)) walk(src, out);
    }
  }
  return out;
}

/** Whether `specifier`, imported by `file` (absolute), reaches dev tooling. */
export function isDevTooling(specifier: string, file: string, root: string): boolean {
  if (specifier === DEVSTACK || specifier.startsWith(`${DEVSTACK}/`)) return true;
  if (/^@pipeline\/[^/]+\/testing(\/|$)/.test(specifier)) return true;
  if (!specifier.startsWith(".")) return false;
  const target = relative(root, resolve(dirname(file), specifier));
  return target.startsWith(`packages${sep}devstack${sep}`) || target.split(sep).includes("testing");
}

/** The imports (static, dynamic, `export … from`, require, type-only) of one file that reach dev tooling. */
export function devToolingImports(file: string, text: string, root: string): FenceBreach[] {
  const { importedFiles } = ts.preProcessFile(text, true, true);
  return importedFiles
    .filter((i) => isDevTooling(i.fileName, file, root))
    .map((i) => ({ file: relative(root, file), line: text.slice(0, i.pos).split("\n").length, specifier: i.fileName }));
}
