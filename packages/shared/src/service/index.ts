export * from "./peer-errors.ts";
export * from "./run-service.ts";
