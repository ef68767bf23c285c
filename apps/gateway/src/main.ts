import { runService } from "@pipeline/shared/service";
import { loadConfig } from "./config.ts";
import { startGateway } from "./service.ts";

await runService({ name: "gateway", loadConfig, start: startGateway });
