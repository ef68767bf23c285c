export * from "./connection.ts";
export * from "./topology.ts";
export * from "./publish.ts";
export * from "./permissions.ts";
export * from "./pub-acks.ts";
export * from "./version.ts";
