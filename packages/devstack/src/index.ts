export * from "./binaries.ts";
export * from "./command.ts";
export * from "./free-port.ts";
export * from "./nats-binary.ts";
export * from "./nats-server.ts";
export * from "./postgres.ts";
export * from "./dev-stack.ts";
export * from "./debian-tools.ts";
