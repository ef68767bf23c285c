export * from "./view.ts";
