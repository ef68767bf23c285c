// A password from libpq's password file (PGPASSFILE, else ~/.pgpass), for the connections recovery
// opens itself (postgres.js reads PGPASSWORD but not the file; pg_dump/pg_restore read both).
import { readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** Splits a passfile line on unescaped `:`, undoing `\:` and `\\`. */
function fields(line: string): string[] {
  const out: string[] = [];
  let field = "";
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === "\\" && i + 1 < line.length) field += line[++i]!;
    else if (c === ":") {
      out.push(field);
      field = "";
    } else field += c;
  }
  out.push(field);
  return out;
}

/**
 * The password of the first line matching `host:port:database:user` (`*` matches anything), as
 * libpq picks it; undefined when there is no file, no match, or the file is readable by group or
 * others (libpq ignores such a file too).
 */
export function passfilePassword(url: string, env: Record<string, string | undefined>): string | undefined {
  const file = env.PGPASSFILE ?? join(env.HOME ?? homedir(), ".pgpass");
  let text: string;
  try {
    if (statSync(file).mode & 0o077) return undefined;
    text = readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
  const u = new URL(url);
  const want = [
    u.hostname,
    u.port || "5432",
    decodeURIComponent(u.pathname.replace(/^\//, "")),
    decodeURIComponent(u.username) || env.PGUSER || env.USER || "",
  ];
  for (const line of text.split(/\r?\n/)) {
    if (!line.trim() || line.startsWith("#")) continue;
    const f = fields(line);
    if (f.length < 5) continue;
    if (want.every((w, i) => f[i] === "*" || f[i] === w)) return f.slice(4).join(":");
  }
  return undefined;
}
