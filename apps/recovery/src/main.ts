import { runService } from "@pipeline/shared/runtime";
import { loadConfig } from "./config.ts";
import { startRecovery } from "./service.ts";

await runService({ name: "recovery", loadConfig, start: startRecovery });
