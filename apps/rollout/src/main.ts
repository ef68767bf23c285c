// The rollout service (issue 15): `bun apps/rollout/src/main.ts`, or `npm run rollout -- serve`.
import { runService } from "@pipeline/shared/service";
import { loadConfig } from "./config.ts";
import { startRollout } from "./service.ts";

await runService({ name: "rollout", loadConfig, start: (config, log) => startRollout(config, process.env, log) });
