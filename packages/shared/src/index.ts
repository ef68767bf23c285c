// Prefer the subpath exports (@pipeline/shared/schemas, /subjects, /db, /nats, /log, /config, /localstack, /testing).
export * from "./schemas/index.ts";
export * from "./subjects.ts";
