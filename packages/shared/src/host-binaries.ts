// Binaries already installed on this host, for production code (the recovery service's pg_dump and
// pg_restore): found on PATH or in Debian's folders, never installed or fetched. The dev tooling
// (@pipeline/devstack) builds on these and may install what is missing; production code does not.
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";

/** Raised when a binary is missing; says what to install. */
export class MissingBinaryError extends Error {
  override name = "MissingBinaryError";
}

/** The first `name` on PATH (and the sbin folders, which root's PATH may lack). */
export function onPath(name: string): string | undefined {
  const dirs = (process.env.PATH ?? "")
    .split(":")
    .concat(["/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"]);
  for (const d of dirs) {
    const p = join(d, name);
    if (d && existsSync(p)) return p;
  }
  return undefined;
}

/**
 * The folder of PostgreSQL's binaries that holds `tool`: PG_BIN_DIR, else Debian's
 * /usr/lib/postgresql/<newest with it>/bin, else the folder of `tool` on PATH.
 */
export function postgresBinDir(tool: string): string | undefined {
  if (process.env.PG_BIN_DIR) return process.env.PG_BIN_DIR;
  const root = "/usr/lib/postgresql";
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => /^\d+$/.test(v) && existsSync(join(root, v, "bin", tool)))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return join(root, versions[0], "bin");
  }
  const found = onPath(tool);
  return found ? join(found, "..") : undefined;
}

/** pg_dump and pg_restore (Debian's postgresql-client): PG_BIN_DIR, /usr/lib/postgresql/<newest>/bin or PATH. */
export function findPgClientTools(): { pgDump: string; pgRestore: string } {
  const dir = postgresBinDir("pg_dump");
  if (!dir) throw new MissingBinaryError("pg_dump not found; apt-get install postgresql-client, or set PG_BIN_DIR");
  return { pgDump: join(dir, "pg_dump"), pgRestore: join(dir, "pg_restore") };
}
