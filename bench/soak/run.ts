// `npm run soak` (or `bun bench/soak/run.ts`): the soak at the settings of the environment
// (bench/soak/settings.ts; default 30 minutes at 20 tasks/s, a solver kill -9 every 5 minutes, one
// gateway restart): prints a table per sample, the growth table and the `soak:` line; exits 1 when
// a goal fails (bench/soak/growth.ts; the apps' logs are then kept and their folder printed), 2 on
// bad settings. With SOAK_JSON=<file> the whole result is written there too (tests/soak.test.ts
// reads it).
import { rmSync, writeFileSync } from "node:fs";
import { failedGoals } from "./growth.ts";
import { printGrowth, soakLine } from "./report.ts";
import { type SoakSettings, soakSettings } from "./settings.ts";
import { runSoak } from "./soak.ts";

const log = (m: string) => console.error(`[soak] ${m}`);
let settings: SoakSettings;
try {
  settings = soakSettings();
} catch (err) {
  console.error((err as Error).message);
  process.exit(2);
}
log(
  `${settings.durationMs / 60_000} min at ${settings.rate} tasks/s; a solver kill -9 every ${settings.killEveryMs / 1000} s, the gateway restarted at the middle; a sample every ${settings.sampleEveryMs / 1000} s, warm-up ${settings.warmupMs / 1000} s`,
);
const result = await runSoak(settings, log);
printGrowth(result);
const failed = failedGoals(result.procs, result.global, result.outcome);
console.log(soakLine(result, failed));
if (settings.jsonFile) writeFileSync(settings.jsonFile, JSON.stringify({ ...result, failed }, null, 2));
if (failed.length) log(`the apps' logs are kept in ${result.logDir}`);
else rmSync(result.logDir, { recursive: true, force: true });
process.exit(failed.length ? 1 : 0);
