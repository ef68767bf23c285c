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
 * How a long-lived pool comes back after its database did (a restart, a failover, a restore).
 * postgres.js waits `(0.5..1) x min(3^n / 100, 20)` seconds before a connection's next attempt,
 * n counting every failed attempt of the pool since its last success: a one-second outage under
 * load fails dozens of attempts, and queries then wait up to 20 s on a database that is back.
 * Here the wait doubles from 50 ms up to 1 s (with the same jitter), and a connect that gets no
 * answer gives up after 10 s, not 30. The postgres.js patch (patches/postgres@3.4.9.patch) is the
 * other half: a connection closed with a write pending no longer hangs until connect_timeout.
 */
export const RECONNECT = {
  backoff: (failures: number) => Math.min(0.05 * 2 ** failures, 1) * (0.5 + Math.random() / 2),
  connect_timeout: 10,
} as const;

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
    ...RECONNECT,
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
