// No import runs back up inside an app: for each app, the folders directly under apps/<app>/src
// import each other in one direction only. Two folders that import each other (a file of a/
// imports from b/ and a file of b/ from a/, tests included) are reported, with one import each
// way. Files at the top of src/ (main.ts, config.ts, ...) are not a folder and are not counted.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

export interface FolderCycle {
  app: string;
  a: string;
  b: string;
  /** One import from a/ into b/, and one from b/ into a/ (`file -> target`, relative to src/). */
  ab: string;
  ba: string;
}

const IMPORT = /(?:\bfrom|\bimport)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g;

function tsFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (e === "node_modules" || e === "dist") continue;
    if (statSync(p).isDirectory()) tsFiles(p, out);
    else if (p.endsWith(".ts") && !p.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

/** The top folder of `file` under `src`, or undefined for a file at the top of src/ (or outside it). */
const topFolder = (src: string, file: string): string | undefined => {
  const parts = relative(src, file).split(sep);
  return parts.length > 1 && parts[0] !== ".." ? parts[0] : undefined;
};

/** Pairs of folders of one app's src/ that import each other. */
export function folderCycles(appsDir: string): FolderCycle[] {
  const out: FolderCycle[] = [];
  for (const app of readdirSync(appsDir).sort()) {
    const src = join(appsDir, app, "src");
    if (!statSync(src, { throwIfNoEntry: false })?.isDirectory()) continue;
    const edges = new Map<string, string>(); // "a b" -> first import seen from a/ into b/
    for (const file of tsFiles(src)) {
      const from = topFolder(src, file);
      if (!from) continue;
      for (const m of readFileSync(file, "utf8").matchAll(IMPORT)) {
        const target = resolve(dirname(file), m[1]!);
        const to = topFolder(src, target);
        if (to && to !== from && !edges.has(`${from} ${to}`))
          edges.set(`${from} ${to}`, `${relative(src, file)} -> ${relative(src, target)}`);
      }
    }
    for (const [key, ab] of edges) {
      const [a, b] = key.split(" ") as [string, string];
      const ba = edges.get(`${b} ${a}`);
      if (ba && a < b) out.push({ app, a, b, ab, ba });
    }
  }
  return out;
}
