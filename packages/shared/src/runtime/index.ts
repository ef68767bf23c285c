export * from "./config.ts";
export * from "./kv.ts";
export * from "./peer-errors.ts";
export * from "./fence.ts";
export * from "./shards.ts";
export * from "./run-service.ts";
export * from "./provision.ts";
