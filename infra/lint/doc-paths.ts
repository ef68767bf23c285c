// The docs name what exists: every repository path a Markdown file names (apps/…, packages/…,
// infra/…, tests/…, docs/…, bench/…; `<placeholder>` and `*` match any one name) is a file or folder
// of the tree, and every relative link [text](file#heading) reaches a file and one of its headings
// (GitHub's anchors). bench/HISTORY.md, a journal of past runs, is left as it was written; paths
// git ignores (bench/results/<timestamp>.json: run output) are not required.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";

export interface DocBreach {
  file: string;
  line: number;
  what: string;
}

const JOURNALS = new Set(["bench/HISTORY.md"]);
const PATH = /(?<![\w./@<-])((?:apps|packages|infra|tests|docs|bench)\/[\w.*<>\/-]*[\w*>\/])/g;
const LINK = /\]\(([^)\s]+)\)/g;

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
export const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");

function headings(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const l of text.split("\n")) {
    if (/^\s*```/.test(l)) fenced = !fenced;
    const m = !fenced && /^#{1,6}\s+(.*?)\s*#*$/.exec(l);
    if (!m) continue;
    const a = anchorOf(m[1]!);
    const n = seen.get(a) ?? 0;
    seen.set(a, n + 1);
    out.add(n ? `${a}-${n}` : a);
  }
  return out;
}

/** What the Markdown files of `files` (tree-relative, read from `root`) name and the tree lacks. */
export function docBreaches(root: string, files: string[], ignored: (paths: string[]) => Set<string>): DocBreach[] {
  const set = new Set(files);
  const dirs = new Set<string>();
  for (const f of files) for (let d = dirname(f); d !== "."; d = dirname(d)) dirs.add(d);
  const found = (p: string) => {
    const q = p.replace(/\/$/, "");
    if (!/[*<]/.test(q)) return set.has(q) || dirs.has(q);
    const re = new RegExp(`^${q.replace(/[.+^$()|[\]\\{}]/g, "\\$&").replace(/<[^>]*>|\*/g, "[^/]*")}$`);
    return files.some((f) => re.test(f)) || [...dirs].some((d) => re.test(d));
  };
  const texts = new Map<string, string>();
  const read = (f: string) => texts.get(f) ?? (texts.set(f, readFileSync(join(root, f), "utf8")), texts.get(f)!);
  const anchors = new Map<string, Set<string>>();
  const breaches: DocBreach[] = [];
  const paths: DocBreach[] = [];
  for (const doc of files.filter((f) => f.endsWith(".md") && !JOURNALS.has(f) && !f.includes("node_modules/"))) {
    read(doc)
      .split("\n")
      .forEach((text, i) => {
        for (const m of text.matchAll(PATH)) {
          const p = m[1]!.replace(/[.,;:]+$/, "");
          if (!found(p)) paths.push({ file: doc, line: i + 1, what: p });
        }
        for (const m of text.matchAll(LINK)) {
          if (/^[a-z][a-z0-9+.-]*:/i.test(m[1]!)) continue;
          const [path, anchor] = m[1]!.split("#");
          const target = path ? normalize(join(dirname(doc), path)).replace(/\/$/, "") : doc;
          if (!set.has(target) && !dirs.has(target))
            breaches.push({ file: doc, line: i + 1, what: `link to ${m[1]}: no such file` });
          else if (anchor && set.has(target) && target.endsWith(".md")) {
            if (!anchors.has(target)) anchors.set(target, headings(read(target)));
            if (!anchors.get(target)!.has(anchor))
              breaches.push({ file: doc, line: i + 1, what: `link to ${m[1]}: no such heading in ${target}` });
          }
        }
      });
  }
  const skip = ignored(paths.map((b) => b.what.replace(/<[^>]*>|\*/g, "x")));
  return [
    ...paths
      .filter((b) => !skip.has(b.what.replace(/<[^>]*>|\*/g, "x")))
      .map((b) => ({ ...b, what: `${b.what}: no such file or folder` })),
    ...breaches,
  ];
}

/** The tree's files (tracked and new ones not ignored) and git's ignore rules. */
export function docPathsOfTree(root: string): DocBreach[] {
  const git = (args: string[], input?: string) => spawnSync("git", args, { cwd: root, encoding: "utf8", input });
  const files = git(["ls-files", "--cached", "--others", "--exclude-standard"]).stdout.split("\n").filter(Boolean);
  const ignored = (paths: string[]) =>
    new Set(
      paths.length
        ? git(["check-ignore", "--no-index", "--stdin"], paths.join("\n")).stdout.split("\n").filter(Boolean)
        : [],
    );
  return docBreaches(root, files, ignored);
}
