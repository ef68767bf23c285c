// `npm test`: type-checks and lints everything (infra/lint.ts), starts a Postgres cluster of the tests' own (each test file
// then creates its own database; each starts its own nats-server), runs `bun test` over the whole
// repo, and ends with the line CI reads: `tests: N passed, N failed`.
import { spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { findChromium, findNatsServer, freePort, redactPassword, startPostgres } from "@pipeline/devstack";
import { fileTimesReport } from "./file-times.ts";
import { runBunTest } from "./test-run.ts";

const root = join(import.meta.dir, "..");
const args = process.argv.slice(2);
const summary = (passed: number, failed: number) => console.log(`tests: ${passed} passed, ${failed} failed`);

if (!args.includes("--no-typecheck")) {
  const tc = spawnSync(join(root, "node_modules", ".bin", "bun"), [join(root, "infra", "typecheck.ts")], {
    stdio: "inherit",
    cwd: root,
  });
  if (tc.status !== 0) {
    console.error("[test] type errors: no test was run");
    summary(0, 1);
    process.exit(1);
  }
  // The layering rules and the function-length ratchet (infra/lint.ts).
  const lint = spawnSync(join(root, "node_modules", ".bin", "bun"), [join(root, "infra", "lint.ts")], {
    stdio: "inherit",
    cwd: root,
  });
  if (lint.status !== 0) {
    console.error("[test] lint failed: no test was run");
    summary(0, 1);
    process.exit(1);
  }
}

// One nats-server for every test file to start (fetched once into .data/bin when none is found).
let nats;
try {
  nats = findNatsServer((m) => console.error(`[test] ${m}`));
} catch (err) {
  console.error(`[test] ${(err as Error).message}`);
  summary(0, 1);
  process.exit(1);
}
console.error(
  `[test] nats-server ${nats.version} (${nats.source}: ${nats.bin}); every test server runs with authentication on`,
);

// The browser test's chromium (Debian's, driven by playwright-core): installed through apt when
// missing and we are root; without it only tests/console.test.ts fails, saying why.
const pathsAsked = args.filter((a) => !a.startsWith("--"));
const quick = args.includes("--unit") || args.includes("--int");
if ((pathsAsked.length === 0 && !quick) || pathsAsked.some((p) => p.includes("console"))) {
  try {
    console.error(`[test] chromium ${findChromium((m) => console.error(`[test] ${m}`))}`);
  } catch (err) {
    console.error(`[test] ${(err as Error).message}`);
  }
}

// One folder per run, so two runs at once (a helper and CI, say) do not remove each other's cluster.
const pgDir = join(root, ".data", `test-pg-${process.pid}`);
rmSync(pgDir, { recursive: true, force: true });
const pg = await startPostgres({
  dataDir: pgDir,
  port: await freePort(),
  fast: true,
  log: (m) => console.error(`[test] ${m}`),
});
console.error(`[test] Postgres for tests on ${redactPassword(pg.adminUrl)}`);

// `--unit` (npm run test:unit): the test files that start nothing (not `*.int.test.ts`, not tests/);
// `--int` (npm run test:int): the integration tests beside the code (`*.int.test.ts`: real NATS and
// Postgres, no app processes). Without either: everything, tests/ (the apps as processes) included.
const testFiles = (keep: (f: string) => boolean) =>
  spawnSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "*.test.ts"], {
    cwd: root,
    encoding: "utf8",
  })
    .stdout.split("\n")
    .filter((f) => f && !f.includes("node_modules") && keep(f));
const paths = args.includes("--unit")
  ? testFiles((f) => !f.endsWith(".int.test.ts") && !f.startsWith("tests/"))
  : args.includes("--int")
    ? testFiles((f) => f.endsWith(".int.test.ts"))
    : args.filter((a) => !a.startsWith("--"));
// API_KEYS_ALLOW_SHORT: the gateways tests start are dev stacks (their keys are short); a test
// of the production rule sets its own environment.
const env = {
  ...process.env,
  NATS_SERVER_BIN: nats.bin,
  TEST_PG_ADMIN_URL: pg.adminUrl,
  LOG_LEVEL: process.env.LOG_LEVEL ?? "warn",
  API_KEYS_ALLOW_SHORT: process.env.API_KEYS_ALLOW_SHORT ?? "1",
  PIPELINE_ENV: process.env.PIPELINE_ENV ?? "dev",
};
// The whole suite runs as two `bun test` processes side by side: the tests beside the code (unit
// and integration: mostly waiting on NATS and Postgres) and tests/ (the apps as processes), each
// file still alone within its process. `--serial`: one process, as for a list of files. The two
// longest files of tests/ that mostly wait (machines booting under systemd, alert timers) run
// with the tests beside the code, so that the two processes end at about the same time.
const WAITING = ["tests/rehearsal.test.ts", "tests/alerts-delivery.test.ts"];
const groups = paths.length
  ? [paths]
  : args.includes("--serial")
    ? [["apps", "packages", "infra", "tests"]]
    : [testFiles((f) => f.startsWith("tests/") && !WAITING.includes(f)), ["apps", "packages", "infra", ...WAITING]];
const startedAt = Date.now();
const runs = await Promise.all(groups.map((g) => runBunTest(root, g, env)));
await pg.stop("immediate").catch(() => {});
rmSync(pgDir, { recursive: true, force: true });

const passed = runs.reduce((n, r) => n + r.passed, 0);
const failed = runs.reduce((n, r) => n + r.failed, 0);
for (const r of runs) for (const line of fileTimesReport(r.times, Date.now() - startedAt)) console.error(line);
// CI shows only the start and the end of this output: why each test failed goes just above the summary.
if (failed) for (const r of runs) for (const line of r.why.report()) console.error(line);
summary(passed, failed);
process.exit(runs.every((r) => r.code === 0) && failed === 0 && passed > 0 ? 0 : 1);
