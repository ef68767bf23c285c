export * from "./home.ts";
export * from "./lease.ts";
