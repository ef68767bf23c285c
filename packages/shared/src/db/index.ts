import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import * as schema from "./schema/index.ts";

export {
  type AuditRow,
  auditLog,
  DELIVERY_STATUSES,
  type DeliveryStatus,
  type LedgerKind,
  type LedgerRow,
  ledger,
  ledgerAll,
  type NewTaskRow,
  type PriceSource,
  type ProviderSlotBlockRow,
  providerSlotBlocks,
  type ReportState,
  type TaskReportRow,
  type TaskRow,
  taskReports,
  tasks,
  type WebhookDeliveryRow,
  webhookDeliveries,
} from "./schema/index.ts";
export { schema };

export type Db = PostgresJsDatabase<typeof schema> & { $client: postgres.Sql };

export interface Database {
  /** The drizzle handle over the pool. */
  db: Db;
  /** The raw postgres.js pool, for the few statements drizzle does not express. */
  sql: postgres.Sql;
  close(): Promise<void>;
}

/**
 * Opens a pool of at most `max` connections. Postgres notices are not logged (they carry no
 * secrets, but are noise). `customPlans`: plan_cache_mode=force_custom_plan on every connection
 * (each execution planned with its parameters and the table's current size).
 */
export function openDatabase(
  url: string,
  opts: { max?: number; appName?: string; customPlans?: boolean } = {},
): Database {
  const sql = postgres(url, {
    max: opts.max ?? 10,
    onnotice: () => {},
    connection: {
      application_name: opts.appName ?? "captcha-pipeline",
      ...(opts.customPlans ? { plan_cache_mode: "force_custom_plan" } : {}),
    },
  });
  const db = drizzle(sql, { schema });
  return { db, sql, close: () => sql.end({ timeout: 5 }) };
}

export { MIGRATION_LOCK_KEY, type MigrationReport, migrateDatabase, migrationMetas } from "./migrations.ts";
export {
  APP_GRANTS,
  APP_ROLES,
  type AppLogin,
  type AppRole,
  applyAppGrants,
  applyAppRoles,
  createAppLogins,
  DB_ROLES,
  dropAppLogins,
  ensureAppRoles,
  ensureGroupRole,
  SCHEMA_TABLES,
  urlWithLogin,
} from "./roles.ts";

const CONNECTION_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "EPIPE",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "57P01",
  "57P02",
  "57P03",
  "08000",
  "08003",
  "08006",
]);

/**
 * True when a query failed because the connection or the server went away (a restart, a
 * failover), not because of the query: worth one retry on a fresh connection, or a 503.
 */
export function isConnectionError(err: unknown): boolean {
  for (
    let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 4;
    e = e.cause as typeof e, depth++
  ) {
    if (typeof e.code === "string" && CONNECTION_CODES.has(e.code)) return true;
  }
  return false;
}

export { bookCharges, type ChargeEntry } from "./book-charges.ts";
export { type GroupCommit, type GroupCommitOptions, groupCommit } from "./group-commit.ts";
export { driverRowMapper } from "./row-mapper.ts";
