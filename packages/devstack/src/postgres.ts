import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  accessSync,
  chmodSync,
  chownSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import postgres from "postgres";
import { findPostgres, type PostgresBinaries } from "./binaries.ts";
import { runCommand } from "./command.ts";
import { waitForPort } from "./free-port.ts";

export interface PostgresOptions {
  dataDir: string;
  port: number;
  /** Trade durability for speed (fsync off): tests only. */
  fast?: boolean;
  /** Address to listen on (default 127.0.0.1); another one also admits clients of its subnets (`samenet`, with the password). */
  host?: string;
  /** Runs the server inside this network namespace (`ip netns exec`): a region's own namespace in tests. */
  netns?: string;
  /** Extra server settings (`name=value`), e.g. `shared_preload_libraries=pg_stat_statements` for bench/profile.ts. */
  settings?: string[];
  log?: (m: string) => void;
}

export interface PostgresHandle {
  /**
   * Admin URL (database `postgres`, superuser `postgres` and its password): a secret, print it
   * through redactUrl only.
   */
  adminUrl: string;
  port: number;
  dataDir: string;
  bins: PostgresBinaries;
  /** URL of another database on this server (the admin's, password included). */
  urlFor(database: string): string;
  /** Creates the database if absent. */
  ensureDatabase(name: string): Promise<void>;
  stop(mode?: "fast" | "immediate"): Promise<void>;
  start(): Promise<void>;
}

const isRoot = () => typeof process.getuid === "function" && process.getuid() === 0;

/** Postgres refuses to run as root: as root we run it as the `postgres` system user. */
function asPgUser(cmd: string, args: string[]): { cmd: string; args: string[] } {
  return isRoot() ? { cmd: "runuser", args: ["-u", "postgres", "--", cmd, ...args] } : { cmd, args };
}

/**
 * Runs a Postgres tool (initdb, pg_ctl) without blocking the event loop: initdb and `pg_ctl -w
 * start` take a second or more, and whatever else this process serves meanwhile (a test's relays,
 * its emulator) must not stall for it.
 */
async function run(cmd: string, args: string[], log: (m: string) => void, netns?: string): Promise<void> {
  const c = asPgUser(cmd, args);
  const { code, output } = await runCommand(
    netns ? ["ip", "netns", "exec", netns, c.cmd, ...c.args] : [c.cmd, ...c.args],
  );
  if (code !== 0) {
    log(output);
    throw new Error(
      `${cmd} ${args[0] ?? ""} failed (exit ${code}): ${output.trim().split("\n").slice(-3).join(" | ")}`,
    );
  }
}

function pgUserIds(): { uid: number; gid: number } {
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { uid, gid };
}

/** Makes sure the `postgres` user exists (root only) and can reach dataDir. */
function prepareDir(dataDir: string, log: (m: string) => void): void {
  mkdirSync(dataDir, { recursive: true });
  if (!isRoot()) return;
  if (spawnSync("id", ["-u", "postgres"]).status !== 0) {
    log("creating system user postgres");
    execFileSync("useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"]);
  }
  const { uid, gid } = pgUserIds();
  chownSync(dataDir, uid, gid);
  chmodSync(dataDir, 0o700);
  // Every parent must be searchable by the postgres user.
  for (let d = dirname(resolve(dataDir)); d !== "/"; d = dirname(d)) {
    const mode = statSync(d).mode;
    if ((mode & 0o001) === 0) chmodSync(d, mode | 0o001);
  }
}

async function running(dataDir: string, bins: PostgresBinaries): Promise<boolean> {
  if (!existsSync(join(dataDir, "postmaster.pid"))) return false;
  const c = asPgUser(bins.pgCtl, ["-D", dataDir, "status"]);
  return (await runCommand([c.cmd, ...c.args], { quiet: true })).code === 0;
}

/** Where a cluster keeps its superuser's password (0600; Postgres ignores the file). */
export const ADMIN_PASSWORD_FILE = "pipeline-admin.password";

/**
 * Every connection authenticates with a password (scram-sha-256): over TCP and over the Unix
 * socket, which lives in the data folder (0700) anyway. No `trust`: any local user could otherwise
 * connect as the superuser (and run shell commands as the postgres user).
 */
function hbaLines(host: string): string {
  return [
    "# Written by packages/devstack/src/postgres.ts at every start: a password for every connection.",
    "# TYPE  DATABASE  USER  ADDRESS       METHOD",
    "local   all       all                 scram-sha-256",
    "host    all       all   127.0.0.1/32  scram-sha-256",
    "host    all       all   ::1/128       scram-sha-256",
    ...(host !== "127.0.0.1" ? ["host    all       all   samenet       scram-sha-256"] : []),
    "",
  ].join("\n");
}

/** Writes a file the postgres user (when we are root) can read and no one else can. */
function writePrivate(file: string, text: string): void {
  writeFileSync(file, text, { mode: 0o600 });
  chmodSync(file, 0o600);
  if (isRoot()) {
    const { uid, gid } = pgUserIds();
    chownSync(file, uid, gid);
  }
}

/** A fresh cluster: initdb with the superuser's password from a file only the postgres user reads. */
async function initCluster(
  dataDir: string,
  bins: PostgresBinaries,
  password: string,
  fast: boolean,
  log: (m: string) => void,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "pipeline-pwfile-"));
  const pwfile = join(dir, "pw");
  try {
    if (isRoot()) {
      const { uid, gid } = pgUserIds();
      chownSync(dir, uid, gid);
    }
    writePrivate(pwfile, `${password}\n`);
    await run(
      bins.initdb,
      [
        "-D",
        dataDir,
        "-U",
        "postgres",
        "--auth=scram-sha-256",
        `--pwfile=${pwfile}`,
        "-E",
        "UTF8",
        "--no-locale",
        ...(fast ? ["--no-sync"] : []),
      ],
      log,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Starts (initialising on first use) a Postgres cluster of the project's own under dataDir on
 * 127.0.0.1:port. A second call on a running cluster reuses it. The superuser `postgres` has a
 * generated password, kept in `<dataDir>/pipeline-admin.password` (0600) and carried by adminUrl;
 * a cluster made before it had one (trust) gets one at its next start.
 */
export async function startPostgres(o: PostgresOptions): Promise<PostgresHandle> {
  const log = o.log ?? (() => {});
  const bins = findPostgres(log);
  const dataDir = resolve(o.dataDir);
  prepareDir(dataDir, log);
  const passwordFile = join(dataDir, ADMIN_PASSWORD_FILE);
  let password: string | undefined;
  if (!existsSync(join(dataDir, "PG_VERSION"))) {
    log(`initdb ${dataDir}`);
    password = randomBytes(24).toString("base64url");
    await initCluster(dataDir, bins, password, o.fast ?? false, log);
    writePrivate(passwordFile, `${password}\n`);
  } else {
    const v = Number(readFileSync(join(dataDir, "PG_VERSION"), "utf8").trim());
    if (v !== bins.version)
      throw new Error(
        `${dataDir} holds a PostgreSQL ${v} cluster but the server found is ${bins.version}; set PG_BIN_DIR or remove the folder`,
      );
    if (existsSync(passwordFile)) password = readFileSync(passwordFile, "utf8").trim();
  }
  accessSync(dataDir, constants.R_OK);
  const host = o.host ?? "127.0.0.1";
  // Without a password yet (a trust cluster of an earlier version) the file is written once it has one.
  if (password !== undefined) writePrivate(join(dataDir, "pg_hba.conf"), hbaLines(host));
  const opts = [
    `-p ${o.port}`,
    `-k ${dataDir}`,
    `-c listen_addresses=${host}`,
    "-c password_encryption=scram-sha-256",
    "-c max_connections=300",
    "-c shared_buffers=128MB",
    ...(o.fast ? ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"] : []),
    ...(o.settings ?? []).map((s) => `-c ${s}`),
  ].join(" ");
  const start = async () => {
    if (!(await running(dataDir, bins)))
      await run(
        bins.pgCtl,
        ["-D", dataDir, "-o", opts, "-l", join(dataDir, "server.log"), "-w", "-t", "60", "start"],
        log,
        o.netns,
      );
    await waitForPort(o.port, 30_000, host);
  };
  await start();
  const adminPassword =
    password ?? (await givePassword(`postgres://postgres@${host}:${o.port}/postgres`, dataDir, host, bins, log));
  const urlFor = (db: string) => `postgres://postgres:${encodeURIComponent(adminPassword)}@${host}:${o.port}/${db}`;
  return {
    adminUrl: urlFor("postgres"),
    port: o.port,
    dataDir,
    bins,
    urlFor,
    async ensureDatabase(name) {
      const sql = postgres(urlFor("postgres"), { max: 1, onnotice: () => {} });
      try {
        const rows = await sql`select 1 from pg_database where datname = ${name}`;
        if (rows.length === 0) await sql.unsafe(`create database "${name.replace(/"/g, "")}"`);
      } finally {
        await sql.end({ timeout: 5 });
      }
    },
    async stop(mode = "fast") {
      if (await running(dataDir, bins)) await run(bins.pgCtl, ["-D", dataDir, "-m", mode, "-w", "stop"], log);
    },
    start,
  };
}

/**
 * A cluster from before the password (trust): the superuser gets one, then pg_hba.conf asks every
 * connection for a password (a reload, no restart). Returns the password.
 */
async function givePassword(
  trustUrl: string,
  dataDir: string,
  host: string,
  bins: PostgresBinaries,
  log: (m: string) => void,
): Promise<string> {
  const password = randomBytes(24).toString("base64url");
  log(
    `${dataDir}: the superuser gets a password (${ADMIN_PASSWORD_FILE}); connections without it are refused from now on`,
  );
  const sql = postgres(trustUrl, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`alter role postgres password '${password}'`);
  } finally {
    await sql.end({ timeout: 5 });
  }
  writePrivate(join(dataDir, ADMIN_PASSWORD_FILE), `${password}\n`);
  writePrivate(join(dataDir, "pg_hba.conf"), hbaLines(host));
  await run(bins.pgCtl, ["-D", dataDir, "reload"], log);
  return password;
}

/** A Postgres URL as it may be printed: the password replaced by `***` (user, host, port and database kept). */
export function redactPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return url.replace(/(\/\/[^:/@]*:)[^@]*@/, "$1***@");
  }
}
