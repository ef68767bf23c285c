// `npm run drill -- <region-partition|region-loss|rollout-good|rollout-bad>`: the two-region drills at full length, each
// self-contained (it starts its own two-region stack and removes it: as root, each region in its
// own network namespace with its nats-server, Postgres and apps, a witness in a third, a bridge
// between them with 30 ms relays on the inter-region links, the emulator; a partition sets a
// region's link down: tests/support/two-regions-netns.ts). It prints the drill's one line. The
// short variants run in `npm test`.
import { spawnSync } from "node:child_process";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
const drills: Record<string, { file: string; env: Record<string, string> }> = {
  "region-partition": { file: "tests/region-failover.test.ts", env: { PARTITION_MS: "30000", DRILL_RATE: "20" } },
  "region-loss": { file: "tests/region-loss.test.ts", env: { DRILL_RATE: "20" } },
  // The rollout drills (issue 15): the default steps (5/25/50/100 %) with a 10 s bake at 20 tasks/s per region.
  "rollout-good": { file: "tests/rollout-good.test.ts", env: { ROLLOUT_DRILL_FULL: "1", DRILL_RATE: "20" } },
  "rollout-bad": { file: "tests/rollout-bad.test.ts", env: { ROLLOUT_DRILL_FULL: "1", DRILL_RATE: "20" } },
};
const name = process.argv[2] ?? "";
const drill = drills[name];
if (!drill) {
  console.error(
    `usage: npm run drill -- <${Object.keys(drills).join("|")}>\n(the single-region drills: npm run recovery -- drill <scenario>)`,
  );
  process.exit(2);
}
const r = spawnSync(process.execPath, [join(root, "infra", "test.ts"), "--no-typecheck", drill.file], {
  cwd: root,
  stdio: "inherit",
  env: { ...process.env, ...drill.env, LOG_LEVEL: process.env.LOG_LEVEL ?? "warn" },
});
process.exit(r.status ?? 1);
