export { type AuditRow, auditLog } from "./audit-log.ts";
export { type IncidentEvent, type IncidentKind, type IncidentRow, incidents } from "./incidents.ts";
export { type LedgerKind, type LedgerRow, ledger, ledgerAll, type PriceSource } from "./ledger.ts";
export { type ProviderBalanceRow, providerBalances } from "./provider-balances.ts";
export { type ProviderPlanShareRow, providerPlanShares } from "./provider-plan-shares.ts";
export { type ProviderSlotBlockRow, providerSlotBlocks } from "./provider-slot-blocks.ts";
export { type ReportState, type TaskReportRow, taskReports } from "./task-reports.ts";
export { type NewTaskRow, type TaskRow, tasks } from "./tasks.ts";
export { type WarmPoolRow, warmPools } from "./warm-pools.ts";
export {
  DELIVERY_STATUSES,
  type DeliveryStatus,
  type WebhookDeliveryRow,
  webhookDeliveries,
} from "./webhook-deliveries.ts";
