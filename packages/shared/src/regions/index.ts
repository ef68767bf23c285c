export * from "./home.ts";
export * from "./lease.ts";
export * from "./fence.ts";
