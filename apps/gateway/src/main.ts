import { runService } from "@pipeline/shared/runtime";
import { loadConfig } from "./config.ts";
import { startGateway } from "./service.ts";

await runService({ name: "gateway", loadConfig, start: startGateway });
