// Functions longer than a limit in every workspace (apps/, packages/, infra/, bench/, tests/ support
// code): at most 80 lines, an object factory named `create…` at most 120 (its methods and inner
// functions count on their own too). Test files are not counted. Prints one line per offender;
// `--max N` changes the limit of plain functions.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";

export interface LongFunction {
  file: string;
  name: string;
  line: number;
  lines: number;
}

/** The TypeScript sources below `dir`, tests and declarations left out. */
export function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (e === "node_modules" || e === "dist") continue;
    if (statSync(p).isDirectory()) sources(p, out);
    else if (p.endsWith(".ts") && !p.endsWith(".test.ts") && !p.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

const nameOf = (n: ts.Node): string => {
  if ((ts.isFunctionDeclaration(n) || ts.isMethodDeclaration(n)) && n.name) return n.name.getText();
  if ((ts.isArrowFunction(n) || ts.isFunctionExpression(n)) && n.parent) {
    const p = n.parent;
    if (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p))
      return p.name.getText();
    if (ts.isCallExpression(p)) return `${p.expression.getText().slice(0, 40)}(callback)`;
  }
  return "(anonymous)";
};

/** The limit of an object factory (`create…`): it wires its parts, so it may be longer. */
export const FACTORY_MAX = 120;
/** The folders measured: every workspace. */
export const MEASURED = ["apps", "packages", "infra", "bench", "tests"];

/** Functions of `file` longer than `max` lines (factories: `factoryMax`). */
export function longFunctions(file: string, text: string, max: number, factoryMax = FACTORY_MAX): LongFunction[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: LongFunction[] = [];
  const visit = (n: ts.Node) => {
    if (
      ts.isFunctionDeclaration(n) ||
      ts.isMethodDeclaration(n) ||
      ts.isArrowFunction(n) ||
      ts.isFunctionExpression(n)
    ) {
      const name = nameOf(n);
      const start = sf.getLineAndCharacterOfPosition(n.getStart()).line;
      const lines = sf.getLineAndCharacterOfPosition(n.getEnd()).line - start + 1;
      if (lines > (/^create[A-Z]/.test(name) ? factoryMax : max)) out.push({ file, name, line: start + 1, lines });
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

if (import.meta.main) {
  const root = join(import.meta.dir, "..", "..");
  const at = process.argv.indexOf("--max");
  const max = at > 0 ? Number(process.argv[at + 1]) : 80;
  const all = MEASURED.flatMap((d) => sources(join(root, d))).flatMap((f) =>
    longFunctions(relative(root, f), readFileSync(f, "utf8"), max),
  );
  for (const f of all.sort((a, b) => b.lines - a.lines)) console.log(`${f.file}:${f.line} ${f.name} ${f.lines} lines`);
  console.log(`${all.length} function(s) over ${max} lines (factories ${FACTORY_MAX})`);
  process.exit(all.length ? 1 : 0);
}
