// Type-checks every workspace (tests included) with tsc, one after the other.
import { spawnSync } from "node:child_process";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
const projects = [
  "packages/shared",
  "packages/devstack",
  "packages/emulator",
  "packages/nats-exporter",
  "packages/client",
  "apps/gateway",
  "apps/solver",
  "apps/recovery",
  "apps/rollout",
  "tests",
  "infra",
  "infra/monitoring",
  "bench",
];
let failed = 0;
for (const p of projects) {
  const r = spawnSync(join(root, "node_modules", ".bin", "tsc"), ["-p", join(root, p, "tsconfig.json")], {
    stdio: "inherit",
  });
  if (r.status !== 0) {
    failed++;
    console.error(`[typecheck] ${p}: failed`);
  }
}
console.log(`[typecheck] ${projects.length - failed}/${projects.length} projects clean`);
process.exit(failed ? 1 : 0);
