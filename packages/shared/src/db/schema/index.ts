export * from "./provider-slots.ts";
export * from "./provider-slot-blocks.ts";
export * from "./tasks.ts";
export * from "./webhook-deliveries.ts";
export * from "./audit-log.ts";
