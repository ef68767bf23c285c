export * from "./home.ts";
