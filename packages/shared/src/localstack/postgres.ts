import { execFileSync, spawnSync } from "node:child_process";
import { accessSync, appendFileSync, chmodSync, chownSync, constants, existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
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
  /** Address to listen on (default 127.0.0.1); another one also trusts clients of its subnets (`samenet`). */
  host?: string;
  /** Runs the server inside this network namespace (`ip netns exec`): a region's own namespace in tests. */
  netns?: string;
  /** Extra server settings (`name=value`), e.g. `shared_preload_libraries=pg_stat_statements` for bench/profile.ts. */
  settings?: string[];
  log?: (m: string) => void;
}

export interface PostgresHandle {
  /** Admin URL (database `postgres`, user `postgres`, trust auth on 127.0.0.1). */
  adminUrl: string;
  port: number;
  dataDir: string;
  bins: PostgresBinaries;
  /** URL of another database on this server. */
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
  const { code, output } = await runCommand(netns ? ["ip", "netns", "exec", netns, c.cmd, ...c.args] : [c.cmd, ...c.args]);
  if (code !== 0) {
    log(output);
    throw new Error(`${cmd} ${args[0] ?? ""} failed (exit ${code}): ${output.trim().split("\n").slice(-3).join(" | ")}`);
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

/**
 * Starts (initialising on first use) a Postgres cluster of the project's own under dataDir on
 * 127.0.0.1:port. A second call on a running cluster reuses it.
 */
export async function startPostgres(o: PostgresOptions): Promise<PostgresHandle> {
  const log = o.log ?? (() => {});
  const bins = findPostgres(log);
  const dataDir = resolve(o.dataDir);
  prepareDir(dataDir, log);
  if (!existsSync(join(dataDir, "PG_VERSION"))) {
    log(`initdb ${dataDir}`);
    await run(bins.initdb, ["-D", dataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale", ...(o.fast ? ["--no-sync"] : [])], log);
  } else {
    const v = Number(readFileSync(join(dataDir, "PG_VERSION"), "utf8").trim());
    if (v !== bins.version) throw new Error(`${dataDir} holds a PostgreSQL ${v} cluster but the server found is ${bins.version}; set PG_BIN_DIR or remove the folder`);
  }
  accessSync(dataDir, constants.R_OK);
  const host = o.host ?? "127.0.0.1";
  if (host !== "127.0.0.1") {
    const hba = join(dataDir, "pg_hba.conf");
    const line = "host all all samenet trust";
    if (!readFileSync(hba, "utf8").includes(line)) appendFileSync(hba, `${line}\n`);
  }
  const opts = [
    `-p ${o.port}`,
    `-k ${dataDir}`,
    `-c listen_addresses=${host}`,
    "-c max_connections=300",
    "-c shared_buffers=128MB",
    ...(o.fast ? ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"] : []),
    ...(o.settings ?? []).map((s) => `-c ${s}`),
  ].join(" ");
  const start = async () => {
    if (!(await running(dataDir, bins))) await run(bins.pgCtl, ["-D", dataDir, "-o", opts, "-l", join(dataDir, "server.log"), "-w", "-t", "60", "start"], log, o.netns);
    await waitForPort(o.port, 30_000, host);
  };
  await start();
  const urlFor = (db: string) => `postgres://postgres@${host}:${o.port}/${db}`;
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
