export * from "./task-types.ts";
export * from "./task.ts";
export * from "./zod-issues.ts";
