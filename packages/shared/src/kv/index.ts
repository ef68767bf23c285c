export * from "./buckets.ts";
export * from "./config-history.ts";
export * from "./heartbeats.ts";
export * from "./runtime-config.ts";
