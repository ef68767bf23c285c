export * from "./config.ts";
export * from "./kv.ts";
