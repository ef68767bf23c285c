export * from "./view.ts";
export * from "./bodies.ts";
export * from "./redrive.ts";
