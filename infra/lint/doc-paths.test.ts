import { expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { anchorOf, docBreaches } from "./doc-paths.ts";

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), "doc-paths-"));
  for (const [f, text] of Object.entries(files)) {
    mkdirSync(join(root, f, ".."), { recursive: true });
    writeFileSync(join(root, f), text);
  }
  return root;
}

test("GitHub's anchors: punctuation dropped, spaces to hyphens", () => {
  expect(anchorOf("Database loss (Postgres database dropped or corrupted)")).toBe(
    "database-loss-postgres-database-dropped-or-corrupted",
  );
  expect(anchorOf("3-node witness (`tests/region-witness-cluster.test.ts`)")).toBe(
    "3-node-witness-testsregion-witness-clustertestts",
  );
  expect(anchorOf("`/metrics` off the clients' listener")).toBe("metrics-off-the-clients-listener");
});

test("a moved file, a placeholder that matches nothing and a link to a missing heading are breaches; the rest passes", () => {
  const files = {
    "apps/solver/src/worker/waiting.ts": "",
    "docs/runbook.md": "# Runbook\n\n## Host loss (the database's host gone)\n\n```sh\n# not a heading\n```\n",
    "docs/a.md": [
      "`apps/solver/src/worker/waiting.ts`, apps/solver/src/ and `apps/<app>/src/worker/*.ts` exist.",
      "`apps/solver/src/adapters/fence.ts` moved; `packages/<x>/README.md` is nowhere.",
      "[runbook](runbook.md#host-loss-the-databases-host-gone), [top](#a), [gone](runbook.md#not-a-heading), [missing](nats.md).",
      "`bench/results/<timestamp>.json` is run output; [site](https://example.com/x.md#y).",
    ].join("\n"),
    "bench/HISTORY.md": "`apps/solver/src/old.ts`",
  };
  const root = tree({ ...files, "docs/a.md": `# A\n${files["docs/a.md"]}` });
  const breaches = docBreaches(
    root,
    Object.keys(files),
    (paths) => new Set(paths.filter((p) => p.startsWith("bench/results/"))),
  );
  expect(breaches.map((b) => `${b.file}:${b.line} ${b.what}`).sort()).toEqual([
    "docs/a.md:3 apps/solver/src/adapters/fence.ts: no such file or folder",
    "docs/a.md:3 packages/<x>/README.md: no such file or folder",
    "docs/a.md:4 link to nats.md: no such file",
    "docs/a.md:4 link to runbook.md#not-a-heading: no such heading in docs/runbook.md",
  ]);
});
