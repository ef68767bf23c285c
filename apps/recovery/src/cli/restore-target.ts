// Where `restore` writes, without a password on the command line (issue 14): process arguments are
// readable by every user of the host (ps, /proc/<pid>/cmdline); the environment is not.
import { passfilePassword } from "../adapters/pgpass.ts";
import { UsageError } from "../context.ts";
import { hasPassword } from "../redact-url.ts";

export const INTO_PASSWORD_WARNING =
  "recovery restore: warning: the password in --into is visible to every user of this host in the process list; give the URL without it and the password through PGPASSWORD or a passfile (~/.pgpass, PGPASSFILE), or the whole URL through RESTORE_INTO_URL";

/**
 * The target database's URL: `--into`, else `RESTORE_INTO_URL`. A password in `--into` still works
 * but is warned about (`warn`, stderr). A URL without a password takes it from PGPASSWORD (read by
 * the driver and the pg tools) or, failing that, from the passfile (filled in here, in memory only:
 * the pg tools get it through PGPASSWORD, never an argument).
 */
export function restoreTarget(o: {
  into: string | undefined;
  env: Record<string, string | undefined>;
  warn: (line: string) => void;
}): string {
  const url = o.into ?? o.env.RESTORE_INTO_URL;
  if (!url)
    throw new UsageError(
      "restore needs a target database: --into <url> (its password through PGPASSWORD or a passfile) or RESTORE_INTO_URL",
    );
  if (o.into && hasPassword(o.into)) o.warn(INTO_PASSWORD_WARNING);
  if (hasPassword(url) || o.env.PGPASSWORD) return url;
  const password = passfilePassword(url, o.env);
  if (password === undefined) return url;
  const u = new URL(url);
  u.password = encodeURIComponent(password);
  return u.toString();
}
