import { spawn } from "node:child_process";
import { findPgClientTools } from "@pipeline/shared/host-binaries";
import postgres from "postgres";

/** Raised when pg_dump / pg_restore fails; carries the tool's last lines of stderr (no URL, no password). */
export class PgToolError extends Error {
  override name = "PgToolError";
}

/**
 * Splits a URL into one without its password plus the password for PGPASSWORD, so the secret
 * never shows in a process list or an error message.
 */
export function connectionArgs(url: string): { url: string; env: Record<string, string> } {
  const u = new URL(url);
  const password = decodeURIComponent(u.password);
  u.password = "";
  return { url: u.toString(), env: password ? { PGPASSWORD: password } : {} };
}

/** A URL as it may be printed: host, port and database only. */
export function describeUrl(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || "5432"}${u.pathname}`;
}

/** The same server, another database. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export function databaseName(url: string): string {
  return decodeURIComponent(new URL(url).pathname.replace(/^\//, ""));
}

async function run(bin: string, args: string[], env: Record<string, string>): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const p = spawn(bin, args, { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    p.stderr.on("data", (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
    p.on("error", reject);
    p.on("exit", (code) => {
      if (code === 0) resolve();
      else
        reject(
          new PgToolError(`${bin.split("/").pop()} exited ${code}: ${err.trim().split("\n").slice(-3).join(" | ")}`),
        );
    });
  });
}

/** `pg_dump -Fc` of the whole database into `file`. */
export async function pgDump(url: string, file: string): Promise<void> {
  const c = connectionArgs(url);
  await run(
    findPgClientTools().pgDump,
    ["--format=custom", "--no-owner", "--no-privileges", `--file=${file}`, `--dbname=${c.url}`],
    c.env,
  );
}

/** `pg_restore` of a custom-format dump into `url`, stopping at the first error. */
export async function pgRestore(file: string, url: string): Promise<void> {
  const c = connectionArgs(url);
  await run(
    findPgClientTools().pgRestore,
    ["--no-owner", "--no-privileges", "--exit-on-error", `--dbname=${c.url}`, file],
    c.env,
  );
}

/** Relations (tables, views, sequences) outside the system schemas: 0 for an empty database. */
export async function userRelations(url: string): Promise<number> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const r = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname not in ('pg_catalog', 'information_schema') and n.nspname not like 'pg_toast%' and n.nspname not like 'pg_temp%'
        and c.relkind in ('r', 'p', 'v', 'm', 'S', 'f')`;
    return r[0]?.n ?? 0;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** Creates or drops a database on the server of `serverUrl` (connecting to its own database). */
export async function adminStatement(serverUrl: string, statement: "create" | "drop", database: string): Promise<void> {
  if (!/^[a-z0-9_]+$/.test(database)) throw new Error(`refusing database name "${database}"`);
  const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    if (statement === "create") await sql.unsafe(`create database "${database}"`);
    else await sql.unsafe(`drop database if exists "${database}" with (force)`);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** Renames a database (no one may be connected to it: used once a restore is complete). */
export async function renameDatabase(serverUrl: string, from: string, to: string): Promise<void> {
  for (const n of [from, to]) if (!/^[a-z0-9_]+$/.test(n)) throw new Error(`refusing database name "${n}"`);
  const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`alter database "${from}" rename to "${to}"`);
  } finally {
    await sql.end({ timeout: 5 });
  }
}
