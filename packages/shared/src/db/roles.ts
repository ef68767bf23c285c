// One database role per app (issue 34): each app logs in with a role that holds only the grants its
// own queries need. `recovery migrate` applies them after the schema migrations, and
// `recovery restore` again after pg_restore (a dump carries no privileges); both run as the owner.
//
//   pipeline_owner    owns the database and its tables (the migrator, the recovery service, the
//                     operator's recovery commands). Made by the operator, never here.
//   pipeline_gateway  inserts queued tasks, reads tasks, cancels and redrives (its columns only),
//                     keeps warm_pools and marks a pool task taken or wasted, reads the ledger, inserts a task's one report,
//                     deletes a row it could not publish through delete_unpublished_task() only.
//   pipeline_solver   reads tasks and updates the columns of solving; webhook_deliveries (no
//                     DELETE), provider_slot_blocks, reads provider_plan_shares,
//                     appends to the ledger, sends the reports, samples the provider's balance.
//   pipeline_rollout  reads the figures of tasks its gate compares (no token, params or callback),
//                     appends to audit_log.
//
// The three app roles are group roles: migrate creates any that is missing (NOLOGIN) when it may
// (a superuser or CREATEROLE: the dev stack, the tests); in production the operator creates them
// with LOGIN and a password (docs/deploy.md). Roles are cluster-wide, so creating them is
// idempotent and safe against a concurrent migrator of another database in the same cluster.
import { randomBytes } from "node:crypto";
import type postgres from "postgres";

/** The role names; other parts (docs, deploy templates) use them as they are. */
export const DB_ROLES = {
  owner: "pipeline_owner",
  gateway: "pipeline_gateway",
  solver: "pipeline_solver",
  rollout: "pipeline_rollout",
} as const;

export type AppRole = "gateway" | "solver" | "rollout";
export const APP_ROLES: readonly AppRole[] = ["gateway", "solver", "rollout"];

/** A grant on one table: table-wide privileges, and privileges limited to some columns. */
export interface TableGrant {
  table: string;
  all?: ReadonlyArray<"SELECT" | "INSERT" | "UPDATE" | "DELETE">;
  columns?: Partial<Record<"SELECT" | "INSERT" | "UPDATE", readonly string[]>>;
}

/** Every table and view of the schema; a new one is nobody's but the owner's until it is listed below. */
export const SCHEMA_TABLES = [
  "tasks",
  "webhook_deliveries",
  "provider_slot_blocks",
  "provider_plan_shares",
  "audit_log",
  "ledger",
  "ledger_all",
  "task_reports",
  "provider_balances",
  "incidents",
  "warm_pools",
] as const;

/**
 * What each app role may do, table by table (anything not here is refused). Read from the apps'
 * queries: apps/gateway/src/adapters, apps/solver/src/adapters (the dead-worker reaper among them),
 * apps/rollout/src/adapters/regions.ts. A query that needs more fails in the int and e2e tests, which run
 * the apps with these roles.
 */
export const APP_GRANTS: Record<AppRole, { tables: TableGrant[]; sequences?: string[]; functions?: string[] }> = {
  gateway: {
    tables: [
      {
        table: "tasks",
        all: ["SELECT"],
        columns: {
          // adapters/pg.ts insertBatch: a fresh `queued` row (no token, no provider id, version 0).
          INSERT: [
            "id",
            "owner",
            "idempotency_key",
            "request_hash",
            "region",
            "type",
            "priority",
            "params",
            "callback_url",
            "deadline_at",
            "not_before",
            "need_by",
            "start_at",
            "pool_id",
            "state",
          ],
          // cancel, redrive, undoRedrive; a warm pool's take and its keeper's expiry (adapters/pools.ts).
          UPDATE: [
            "pool_taken_at",
            "pool_take_key",
            "pool_wasted_at",
            "state",
            "version",
            "attempts",
            "redrives",
            "provider_id",
            "deadline_at",
            "lease_owner",
            "lease_until",
            "completed_at",
            "updated_at",
          ],
        },
      },
      // Warm pools (adapters/pools.ts): the client's pools; a deleted one keeps its row.
      { table: "warm_pools", all: ["SELECT", "INSERT", "UPDATE"] },
      // GET /v1/usage: the calling key's spend (every entry: the view of the ledger and the charges on task rows).
      { table: "ledger_all", all: ["SELECT"] },
      // Reports (adapters/reports.ts): one insert per task, read back on a conflict.
      {
        table: "task_reports",
        all: ["SELECT"],
        columns: {
          INSERT: [
            "task_id",
            "owner",
            "accepted",
            "task_type",
            "sitekey",
            "region",
            "provider_task_id",
            "provider_key_ref",
          ],
        },
      },
    ],
    // deleteUnpublished: the one DELETE, of a queued row nobody touched (version 0), by id.
    functions: ["delete_unpublished_task(uuid)"],
  },
  solver: {
    tables: [
      {
        table: "tasks",
        all: ["SELECT"],
        columns: {
          // claim, beginSubmit/endSubmit, checkpoints, complete, fail, release, renewLeases, the reaper.
          UPDATE: [
            "state",
            "version",
            "attempts",
            "lease_owner",
            "lease_until",
            "started_at",
            "updated_at",
            "claimed_at",
            "submit_started_at",
            "submit_owner",
            "provider_id",
            "provider_key_ref",
            "provider_submissions",
            "provider_polls",
            "token",
            "user_agent",
            "token_expires_at",
            "error_code",
            "error_message",
            "completed_at",
            "charge_provider_task_id",
            "charge_provider",
            "charge_region",
            "charge_solver_version",
            "charge_micros",
            "charge_price_source",
            "charged_at",
          ],
        },
      },
      // The notifier's queue (retention, run by recovery, deletes).
      { table: "webhook_deliveries", all: ["SELECT", "INSERT", "UPDATE"] },
      // The fleet's plan of provider units: a solver's own block, and a dead peer's (reaper).
      { table: "provider_slot_blocks", all: ["SELECT", "INSERT", "UPDATE", "DELETE"] },
      // With several regions: the region's share of the plan (the lease keeper writes it).
      { table: "provider_plan_shares", all: ["SELECT"] },
      // A task's charges beyond the one on its row (batched-writes.ts) and the refunds of reports (reports.ts): append only.
      { table: "ledger", all: ["SELECT", "INSERT"] },
      // The reports' refunds mirror the task's charge, wherever it is kept.
      { table: "ledger_all", all: ["SELECT"] },
      // The report sender: due reports, their outcome.
      {
        table: "task_reports",
        all: ["SELECT"],
        columns: { UPDATE: ["state", "attempts", "next_attempt_at", "last_reply", "sent_at"] },
      },
      // The balance sampler (balance/sampler.ts): the newest sample's time, a new sample (append only).
      { table: "provider_balances", all: ["SELECT", "INSERT"] },
    ],
  },
  rollout: {
    tables: [
      // regions.ts windowRows: the gate's figures, nothing a client sent or got back.
      {
        table: "tasks",
        columns: {
          SELECT: [
            "id",
            "region",
            "state",
            "attempts",
            "error_code",
            "provider_submissions",
            "created_at",
            "completed_at",
            "type",
          ],
        },
      },
      // regions.ts windowRows: the clients' verdicts on the answers (the acceptance rates).
      { table: "task_reports", columns: { SELECT: ["task_id", "accepted"] } },
      // regions.ts audit: its decisions (append only).
      { table: "audit_log", all: ["INSERT"] },
    ],
    sequences: ["audit_log_id_seq"],
  },
};

const q = (ident: string) => `"${ident.replace(/"/g, '""')}"`;

/**
 * Makes sure the three app roles exist, creating any missing one as a NOLOGIN group role. Safe to
 * run from several databases of one cluster at once (a role another session has just created is
 * taken as there). A missing role that this session may not create is an Error naming the role
 * and the statement an administrator must run.
 */
export async function ensureAppRoles(sql: postgres.Sql): Promise<void> {
  for (const app of APP_ROLES) await ensureGroupRole(sql, DB_ROLES[app]);
}

/** One role of ensureAppRoles: created NOLOGIN when missing, race-safe across sessions. */
export async function ensureGroupRole(sql: postgres.Sql, role: string): Promise<void> {
  if (!/^[a-z][a-z0-9_]*$/.test(role)) throw new Error(`role name "${role}": lower-case letters, digits and _ only`);
  const [have] = await sql<{ n: number }[]>`select count(*)::int as n from pg_roles where rolname = ${role}`;
  if (have!.n > 0) return;
  try {
    // Two sessions that both found it missing: the second's CREATE fails with duplicate_object
    // (or unique_violation on pg_authid, when it raced the first's commit): taken as there.
    await sql.unsafe(`do $$ begin
      if not exists (select from pg_catalog.pg_roles where rolname = '${role}') then create role ${q(role)} nologin; end if;
    exception when duplicate_object or unique_violation then null;
    end $$`);
  } catch (err) {
    if ((err as { code?: string }).code === "42501")
      throw new Error(
        `database role ${role} is missing and ${await currentUser(sql)} may not create it: as a superuser run \`CREATE ROLE ${role} LOGIN PASSWORD '...'\` (docs/deploy.md), then migrate again`,
        { cause: err },
      );
    throw err;
  }
}

async function currentUser(sql: postgres.Sql): Promise<string> {
  const [r] = await sql<{ u: string }[]>`select current_user as u`;
  return r!.u;
}

/**
 * Sets the app roles' privileges on the current database to exactly APP_GRANTS: everything is
 * revoked from them (and from PUBLIC) first, then granted, in one transaction, so a run after a
 * change of APP_GRANTS also takes away what is no longer listed. Run by the owner of the tables.
 */
export async function applyAppGrants(sql: postgres.Sql): Promise<void> {
  const roles = APP_ROLES.map((a) => q(DB_ROLES[a])).join(", ");
  await sql.begin(async (tx) => {
    const [db] = await tx<{ name: string }[]>`select current_database() as name`;
    const database = q(db!.name);
    // No one connects or makes temp tables but the roles given them; no one creates in `public`.
    await tx.unsafe(`revoke all on database ${database} from public`);
    await tx.unsafe(`grant connect on database ${database} to ${roles}`);
    await tx.unsafe(`revoke create on schema public from public`);
    await tx.unsafe(`grant usage on schema public to ${roles}`);
    // The gateway's one DELETE: a row it inserted but could not publish, while nothing happened to it.
    await tx.unsafe(`create or replace function public.delete_unpublished_task(task_id uuid) returns boolean
      language sql security definer set search_path = pg_catalog, public
      as $$ with d as (delete from public.tasks where id = task_id and state = 'queued' and version = 0 returning 1) select exists (select from d) $$`);
    await tx.unsafe(`revoke all on function public.delete_unpublished_task(uuid) from public, ${roles}`);
    const present = new Set(
      (
        await tx<{ t: string }[]>`select tablename as t from pg_tables where schemaname = 'public'
                                 union all select viewname from pg_views where schemaname = 'public'`
      ).map((r) => r.t),
    );
    for (const t of present) await tx.unsafe(`revoke all on table public.${q(t)} from public, ${roles}`);
    const sequences = (
      await tx<{ s: string }[]>`select sequencename as s from pg_sequences where schemaname = 'public'`
    ).map((r) => r.s);
    for (const s of sequences) await tx.unsafe(`revoke all on sequence public.${q(s)} from public, ${roles}`);
    for (const app of APP_ROLES) {
      const role = q(DB_ROLES[app]);
      const g = APP_GRANTS[app];
      for (const t of g.tables) {
        if (!present.has(t.table)) throw new Error(`APP_GRANTS.${app}: table ${t.table} is not in the schema`);
        if (t.all?.length) await tx.unsafe(`grant ${t.all.join(", ")} on table public.${q(t.table)} to ${role}`);
        for (const [priv, cols] of Object.entries(t.columns ?? {}))
          await tx.unsafe(`grant ${priv} (${cols.map(q).join(", ")}) on table public.${q(t.table)} to ${role}`);
      }
      for (const s of g.sequences ?? []) await tx.unsafe(`grant usage on sequence public.${q(s)} to ${role}`);
      for (const f of g.functions ?? []) await tx.unsafe(`grant execute on function public.${f} to ${role}`);
    }
  });
}

/** ensureAppRoles, then applyAppGrants: what migrate and restore run. */
export async function applyAppRoles(sql: postgres.Sql): Promise<void> {
  await ensureAppRoles(sql);
  await applyAppGrants(sql);
}

/** A login of an app role: its user name and password (a URL's userinfo). */
export interface AppLogin {
  user: string;
  password: string;
}

const loginName = (prefix: string, app: AppRole) => {
  if (!/^[a-z][a-z0-9_]*$/.test(prefix))
    throw new Error(`login prefix "${prefix}": lower-case letters, digits and _ only`);
  const name = `${prefix}_${app}_login`;
  if (name.length > 63) throw new Error(`login name ${name} is longer than Postgres keeps (63)`);
  return name;
};

/**
 * For a cluster of our own (dev stack, tests): one login per app, `<prefix>_<app>_login`, member of
 * the app's role (ensureAppRoles), with a fresh random password (an existing login gets a new one).
 * Needs a superuser (or CREATEROLE) session. The login holds no privilege of its own: it has what
 * its role is granted on each database.
 */
export async function createAppLogins(sql: postgres.Sql, prefix: string): Promise<Record<AppRole, AppLogin>> {
  await ensureAppRoles(sql);
  const out = {} as Record<AppRole, AppLogin>;
  for (const app of APP_ROLES) {
    const user = loginName(prefix, app);
    const password = randomBytes(24).toString("base64url");
    // DDL takes no parameters: the name is checked above, the password is base64url.
    await sql.unsafe(`do $$ begin
      if exists (select from pg_catalog.pg_roles where rolname = '${user}') then alter role ${q(user)} login password '${password}';
      else create role ${q(user)} login password '${password}'; end if;
    end $$`);
    await sql.unsafe(`grant ${q(DB_ROLES[app])} to ${q(user)}`);
    out[app] = { user, password };
  }
  return out;
}

/** Drops the logins createAppLogins made for `prefix` (after the databases they used are gone). */
export async function dropAppLogins(sql: postgres.Sql, prefix: string): Promise<void> {
  for (const app of APP_ROLES) await sql.unsafe(`drop role if exists ${q(loginName(prefix, app))}`);
}

/** `url` with another user and password (the host, port and database kept). */
export function urlWithLogin(url: string, login: AppLogin): string {
  const u = new URL(url);
  u.username = encodeURIComponent(login.user);
  u.password = encodeURIComponent(login.password);
  return u.toString();
}
