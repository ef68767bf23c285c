// `npm run lint` (and the first step of `npm test`, after the type check), fence by fence:
// - Biome's check (biome.json, generated from infra/lint/biome-config.ts, which is checked too):
//   the format (width 120), the import order, and the import fences (domain/ imports no adapter or
//   I/O library; nothing outside tests/ imports tests/; no app imports another; nats/ is the lower
//   layer of @pipeline/shared; no `export *` barrel);
// - no production file of apps/ or packages/ imports @pipeline/devstack (infra/lint/devstack-fence.ts);
// - no import runs back up inside an app (infra/lint/folder-cycles.ts);
// - the docs name what exists (infra/lint/doc-paths.ts);
// - the function-length ratchet over every workspace: at most 80 lines, a `create…` factory 120,
//   except those listed in infra/lint/long-functions.allow at their length today (a new one, or a
//   listed one grown longer, fails; split one, then delete its line).
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { renderBiomeConfig } from "./lint/biome-config.ts";
import { devToolingImports, productionSources } from "./lint/devstack-fence.ts";
import { docPathsOfTree } from "./lint/doc-paths.ts";
import { folderCycles } from "./lint/folder-cycles.ts";
import { FACTORY_MAX, longFunctions, MEASURED, sources } from "./lint/long-functions.ts";

const root = join(import.meta.dir, "..");
const MAX = 80;
let failed = false;

// biome.json is what infra/lint/biome-config.ts makes (each fence written once there).
if (readFileSync(join(root, "biome.json"), "utf8") !== renderBiomeConfig()) {
  console.error(
    "[lint] biome.json differs from infra/lint/biome-config.ts: run `bun infra/lint/biome-config.ts --write`",
  );
  failed = true;
}

const biome = spawnSync(join(root, "node_modules", ".bin", "biome"), ["check", "--colors=off"], {
  cwd: root,
  encoding: "utf8",
});
if (biome.status !== 0) {
  process.stderr.write(biome.stdout + biome.stderr);
  console.error(
    "[lint] biome check failed (lint, format at width 120, import order; `node_modules/.bin/biome check --write` fixes format and order)",
  );
  failed = true;
} else console.error(`[lint] biome: ${(biome.stdout + biome.stderr).trim().split("\n").at(-1)}`);

// Production code never loads dev tooling (STYLE.md "As the house grows", issue 35).
const prod = productionSources(root);
const breaches = prod.flatMap((f) => devToolingImports(f, readFileSync(f, "utf8"), root));
for (const b of breaches) {
  console.error(
    `[lint] ${b.file}:${b.line} imports "${b.specifier}": production code never loads dev tooling (@pipeline/devstack, testing/ folders); only tests, infra and bench may. What a binary needs of the host is in @pipeline/shared/host-binaries and @pipeline/shared/dev-stack-file (issue 35)`,
  );
  failed = true;
}
console.error(
  `[lint] dev-tooling fence: ${prod.length} production files, ${breaches.length} importing @pipeline/devstack or a testing/ folder`,
);

const cycles = folderCycles(join(root, "apps"));
for (const c of cycles) {
  console.error(
    `[lint] apps/${c.app}/src: ${c.a}/ and ${c.b}/ import each other (${c.ab}; ${c.ba}): move the shared piece so that imports run one way`,
  );
  failed = true;
}
if (!cycles.length) console.error("[lint] no import runs back up inside an app (folders of apps/*/src import one way)");

// The docs name what exists: repository paths and relative links of the Markdown files (infra/lint/doc-paths.ts).
const docBreaches = docPathsOfTree(root);
for (const d of docBreaches) {
  console.error(`[lint] ${d.file}:${d.line} ${d.what}: point the doc at where it is now`);
  failed = true;
}
if (!docBreaches.length)
  console.error("[lint] docs: every repository path and relative link of the Markdown files exists");

// `file name lines` per line: the known long functions and the length they may not exceed.
const allowed = new Map(
  readFileSync(join(import.meta.dir, "lint", "long-functions.allow"), "utf8")
    .split("\n")
    .filter((l) => l.trim() && !l.startsWith("#"))
    .map((l) => {
      const [file, name, lines] = l.trim().split(/\s+/);
      return [`${file} ${name}`, Number(lines)] as const;
    }),
);
const found = MEASURED.flatMap((d) => sources(join(root, d))).flatMap((f) =>
  longFunctions(relative(root, f), readFileSync(f, "utf8"), MAX),
);
for (const f of found) {
  const limit = allowed.get(`${f.file} ${f.name}`);
  if (limit === undefined || f.lines > limit) {
    console.error(
      `[lint] ${f.file}:${f.line} ${f.name} is ${f.lines} lines (at most ${limit ?? (/^create[A-Z]/.test(f.name) ? FACTORY_MAX : MAX)}): split it`,
    );
    failed = true;
  }
}
const fixed = [...allowed.keys()].filter((k) => !found.some((f) => `${f.file} ${f.name}` === k));
if (fixed.length)
  console.error(`[lint] now at most ${MAX} lines, remove from infra/lint/long-functions.allow: ${fixed.join(", ")}`);
console.error(
  `[lint] functions over ${MAX} lines (factories ${FACTORY_MAX}) in ${MEASURED.join(", ")}: ${found.length} (${allowed.size} allowed for now)`,
);
process.exit(failed ? 1 : 0);
