import { runService } from "@pipeline/shared/service";
import { loadConfig } from "./config.ts";
import { startSolver } from "./service.ts";

await runService({ name: "solver", loadConfig, start: startSolver });
