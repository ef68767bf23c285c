export * from "./view.ts";
export * from "./bodies.ts";
