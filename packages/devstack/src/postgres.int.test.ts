// The project's own Postgres clusters (dev stack, tests, bench) ask every connection for a password
// (issue 34): initdb no longer trusts every local user. A cluster of its own for this file, and
// one made the old way (trust) that gets its password at its next start.
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { freePort } from "./free-port.ts";
import { ADMIN_PASSWORD_FILE, type PostgresHandle, redactPassword, startPostgres } from "./postgres.ts";

const dirs: string[] = [];
const clusters: PostgresHandle[] = [];
afterAll(async () => {
  for (const c of clusters) await c.stop("immediate").catch(() => {});
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** "ok", or the SQLSTATE / message of the refusal. */
async function connect(o: { url?: string; host?: string; port?: number; password?: string }): Promise<string> {
  const sql = o.url
    ? postgres(o.url, { max: 1, onnotice: () => {}, connect_timeout: 10 })
    : postgres({
        host: o.host,
        port: o.port,
        user: "postgres",
        database: "postgres",
        ...(o.password !== undefined ? { password: o.password } : {}),
        max: 1,
        onnotice: () => {},
        connect_timeout: 10,
      });
  try {
    await sql`select 1`;
    return "ok";
  } catch (err) {
    return String((err as { code?: string }).code ?? (err as Error).message);
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

async function cluster(lines: string[]): Promise<PostgresHandle> {
  const dataDir = mkdtempSync(join(tmpdir(), "pipeline-pgauth-"));
  dirs.push(dataDir);
  const pg = await startPostgres({ dataDir, port: await freePort(), fast: true, log: (m) => lines.push(m) });
  clusters.push(pg);
  return pg;
}

const passwordOf = (pg: PostgresHandle) => decodeURIComponent(new URL(pg.adminUrl).password);

test("a new cluster: the admin URL carries a generated password; without it, or with a wrong one, over TCP or the socket, the connection is refused", async () => {
  const lines: string[] = [];
  const pg = await cluster(lines);
  const password = passwordOf(pg);
  expect(password.length).toBeGreaterThanOrEqual(24);
  expect(await connect({ url: pg.adminUrl })).toBe("ok");
  // 28P01: invalid_password. Without a password the client has none to answer the server's SCRAM request with.
  expect(await connect({ host: "127.0.0.1", port: pg.port, password: "wrong-password" })).toBe("28P01");
  expect(await connect({ host: "127.0.0.1", port: pg.port })).not.toBe("ok");
  expect(await connect({ url: pg.adminUrl.replace(`:${encodeURIComponent(password)}@`, "@") })).not.toBe("ok");
  expect(await connect({ host: pg.dataDir, port: pg.port })).not.toBe("ok");
  expect(await connect({ host: pg.dataDir, port: pg.port, password: "wrong-password" })).toBe("28P01");
  expect(await connect({ host: pg.dataDir, port: pg.port, password })).toBe("ok");
  // The password is kept for the owner alone; pg_hba.conf trusts no one.
  const file = join(pg.dataDir, ADMIN_PASSWORD_FILE);
  expect(statSync(file).mode & 0o777).toBe(0o600);
  expect(readFileSync(file, "utf8").trim()).toBe(password);
  const hba = readFileSync(join(pg.dataDir, "pg_hba.conf"), "utf8");
  expect(hba).not.toMatch(/^\s*(local|host)\S*\s.*\s(trust|peer|ident)\s*$/m);
  expect(hba).toMatch(/^local\s+all\s+all\s+scram-sha-256$/m);
  // Nothing it logged, nor the printable form of its URL, holds the password.
  expect(lines.join("\n")).not.toContain(password);
  expect(redactPassword(pg.adminUrl)).not.toContain(password);
  expect(redactPassword(pg.adminUrl)).toBe(`postgres://postgres:***@127.0.0.1:${pg.port}/postgres`);
  // A second start on the running cluster reuses the password.
  const again = await startPostgres({ dataDir: pg.dataDir, port: pg.port, fast: true });
  expect(again.adminUrl).toBe(pg.adminUrl);
}, 60_000);

test("a cluster made before (trust, no password) gets a password at its next start and stops trusting", async () => {
  const pg = await cluster([]);
  // Back to what initdb --auth=trust left: no password file, pg_hba.conf trusting local users.
  await pg.stop("fast");
  rmSync(join(pg.dataDir, ADMIN_PASSWORD_FILE));
  writeFileSync(join(pg.dataDir, "pg_hba.conf"), "local all all trust\nhost all all 127.0.0.1/32 trust\n");
  await pg.start();
  expect(await connect({ host: "127.0.0.1", port: pg.port })).toBe("ok");
  await pg.stop("fast");

  const lines: string[] = [];
  const upgraded = await startPostgres({ dataDir: pg.dataDir, port: pg.port, fast: true, log: (m) => lines.push(m) });
  const password = passwordOf(upgraded);
  expect(password).not.toBe(passwordOf(pg));
  expect(existsSync(join(pg.dataDir, ADMIN_PASSWORD_FILE))).toBe(true);
  expect(await connect({ url: upgraded.adminUrl })).toBe("ok");
  expect(await connect({ host: "127.0.0.1", port: pg.port })).not.toBe("ok");
  expect(await connect({ host: pg.dataDir, port: pg.port })).not.toBe("ok");
  expect(lines.join("\n")).not.toContain(password);
}, 60_000);
