export * from "./classify.ts";
export * from "./params.ts";
export * from "./replies.ts";
