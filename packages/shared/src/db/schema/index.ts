export * from "./tasks.ts";
