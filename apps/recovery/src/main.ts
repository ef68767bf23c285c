import { runService } from "@pipeline/shared/service";
import { loadConfig } from "./config.ts";
import { startRecovery } from "./service.ts";

await runService({ name: "recovery", loadConfig, start: startRecovery });
