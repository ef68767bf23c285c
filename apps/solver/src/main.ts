import { runService } from "@pipeline/shared/runtime";
import { loadConfig } from "./config.ts";
import { startSolver } from "./service.ts";

await runService({ name: "solver", loadConfig, start: startSolver });
