export * from "./assignment.ts";
