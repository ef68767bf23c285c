// Postgres over verified TLS as infra/deploy sets it up (issue 34), against a real server: the TLS
// lines of infra/deploy/postgres/captcha-pipeline.conf.tftpl and the whole pg_hba.conf.tftpl
// (hostssl only), a server certificate of a test CA for 127.0.0.1. The apps' connection is the
// documented one: `DATABASE_URL=...?sslmode=verify-full`, the CA through NODE_EXTRA_CA_CERTS for
// Bun (postgres.js, in a process of its own: Bun reads it at start) and PGSSLROOTCERT for libpq
// (recovery's pg_dump). It checks that this connects over TLS, and that it refuses a server it
// cannot verify, a connection without TLS, and `sslrootcert=` in the URL (why the docs leave it out).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findPostgres, freePort, onPath, type PostgresHandle, startPostgres } from "@pipeline/devstack";
import postgres from "postgres";

const ROOT = join(import.meta.dir, "..");
const PG_DIR = join(ROOT, "infra", "deploy", "postgres");
const APP_ROLES = ["pipeline_owner", "pipeline_gateway", "pipeline_solver", "pipeline_rollout"];
const PASSWORD = "tls-test-password-0001";

let dir = "";
let pg: PostgresHandle | undefined;
let port = 0;

function sh(cmd: string[], env: Record<string, string> = {}) {
  const r = spawnSync(cmd[0]!, cmd.slice(1), { env: { ...process.env, ...env }, encoding: "utf8", timeout: 60_000 });
  return { status: r.status, out: `${r.stdout ?? ""}${r.stderr ?? ""}`.trim(), stdout: r.stdout ?? "" };
}

/** A test CA and server certificates it signs: one for 127.0.0.1 (the server's address here), one for another address. */
function makeCertificates(): void {
  const ossl = (...args: string[]) => {
    const r = sh(["openssl", ...args]);
    if (r.status !== 0) throw new Error(`openssl ${args[0]}: ${r.out}`);
  };
  ossl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    join(dir, "ca.key"),
    "-out",
    join(dir, "ca.pem"),
    "-days",
    "1",
    "-subj",
    "/CN=internal-ca",
  );
  for (const [name, san] of [
    ["server", "IP:127.0.0.1"],
    ["other", "IP:10.9.9.9"],
  ] as const) {
    ossl(
      "req",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      join(dir, `${name}-key.pem`),
      "-out",
      join(dir, `${name}.csr`),
      "-subj",
      `/CN=${name}`,
    );
    writeFileSync(join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
    ossl(
      "x509",
      "-req",
      "-in",
      join(dir, `${name}.csr`),
      "-CA",
      join(dir, "ca.pem"),
      "-CAkey",
      join(dir, "ca.key"),
      "-CAcreateserial",
      "-out",
      join(dir, `${name}.pem`),
      "-days",
      "1",
      "-extfile",
      join(dir, `${name}.ext`),
    );
  }
  // An unrelated CA: a server the apps must not trust.
  ossl(
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    join(dir, "stranger.key"),
    "-out",
    join(dir, "stranger.pem"),
    "-days",
    "1",
    "-subj",
    "/CN=stranger",
  );
}

/** The TLS settings of the conf.d template, with the certificate paths pointed at this test's live files. */
function tlsSettings(): string[] {
  const conf = readFileSync(join(PG_DIR, "captcha-pipeline.conf.tftpl"), "utf8");
  const lines = conf.split("\n").filter((l) => /^ssl\w* = /.test(l));
  expect(lines.map((l) => l.split(" = ")[0])).toEqual([
    "ssl",
    "ssl_cert_file",
    "ssl_key_file",
    "ssl_min_protocol_version",
  ]);
  return lines.map((l) =>
    l
      .replace("'/etc/postgresql/tls/server.pem'", join(dir, "live.pem"))
      .replace("'/etc/postgresql/tls/server-key.pem'", join(dir, "live-key.pem"))
      .replace(" = ", "=")
      .replaceAll("'", ""),
  );
}

/** Installs a certificate and its key where the server reads them: postgres's, the key 0600. */
function installCertificate(server: string): void {
  const owner =
    process.getuid?.() === 0
      ? {
          uid: Number(sh(["id", "-u", "postgres"]).stdout.trim()),
          gid: Number(sh(["id", "-g", "postgres"]).stdout.trim()),
        }
      : undefined;
  for (const [from, to, mode] of [
    [`${server}.pem`, "live.pem", 0o644],
    [`${server}-key.pem`, "live-key.pem", 0o600],
  ] as const) {
    writeFileSync(join(dir, to), readFileSync(join(dir, from)));
    if (owner) chownSync(join(dir, to), owner.uid, owner.gid);
    chmodSync(join(dir, to), mode);
  }
}

/** Replaces the server's certificate and reloads (SIGHUP re-reads the files, as `systemctl reload postgresql`). */
function useCertificate(server: string): void {
  installCertificate(server);
  const r = sh(
    ["psql", `postgres://postgres@127.0.0.1:${port}/postgres?sslmode=require`, "-tAc", "select pg_reload_conf()"],
    { PGPASSWORD: PASSWORD },
  );
  expect(r.out).toBe("t");
}

beforeAll(async () => {
  expect(onPath("openssl")).toBeDefined();
  dir = mkdtempSync(join(tmpdir(), "deploy-pg-tls-"));
  makeCertificates();
  chmodSync(dir, 0o755);
  installCertificate("server");
  port = await freePort();
  pg = await startPostgres({ dataDir: join(dir, "data"), port, fast: true, settings: tlsSettings() });
  // Under initdb's trust: the four app roles (and a password for postgres, for the checks below),
  // then the deploy's pg_hba.conf (private_cidr = this machine) and a reload.
  const admin = postgres(pg.adminUrl, { max: 1, onnotice: () => {} });
  try {
    for (const role of APP_ROLES) await admin.unsafe(`create role ${role} login password '${PASSWORD}'`);
    await admin.unsafe(`alter role postgres password '${PASSWORD}'`);
    const hba = readFileSync(join(PG_DIR, "pg_hba.conf.tftpl"), "utf8").replaceAll("${private_cidr}", "127.0.0.1/32");
    writeFileSync(join(pg.dataDir, "pg_hba.conf"), hba);
    await admin`select pg_reload_conf()`;
  } finally {
    await admin.end({ timeout: 5 });
  }
}, 120_000);

afterAll(async () => {
  await pg?.stop("immediate");
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const url = (role: string, query: string) => `postgres://${role}:${PASSWORD}@127.0.0.1:${port}/postgres${query}`;

/** Connects with the apps' driver in a Bun process of its own (NODE_EXTRA_CA_CERTS is read at start): what the connection is, or the error. */
function appConnect(
  databaseUrl: string,
  extraCa: string | undefined,
): { ok: boolean; ssl?: boolean; version?: string; error?: string } {
  const script = join(dir, "connect.ts");
  writeFileSync(
    script,
    `import { openDatabase } from ${JSON.stringify(join(ROOT, "packages", "shared", "src", "db", "index.ts"))};
const db = openDatabase(process.env.DATABASE_URL!, { max: 1, appName: "tls-test" });
try {
  const [r] = await db.sql\`select ssl, version from pg_stat_ssl where pid = pg_backend_pid()\`;
  console.log(JSON.stringify({ ok: true, ssl: r.ssl, version: r.version }));
} catch (err) {
  console.log(JSON.stringify({ ok: false, error: (err as Error).message }));
} finally {
  await db.close();
}
`,
  );
  const env: Record<string, string> = { ...(process.env as Record<string, string>), DATABASE_URL: databaseUrl };
  delete env.NODE_EXTRA_CA_CERTS;
  if (extraCa) env.NODE_EXTRA_CA_CERTS = extraCa;
  const r = spawnSync(process.execPath, [script], { env, encoding: "utf8", timeout: 60_000 });
  const line = (r.stdout ?? "").trim().split("\n").pop() ?? "";
  expect(line, `${r.stdout}${r.stderr}`).toStartWith("{");
  return JSON.parse(line) as ReturnType<typeof appConnect>;
}

/** `pg_dump` (libpq) as recovery runs it for a snapshot, with PGSSLROOTCERT from common.env. */
function pgDump(databaseUrl: string, rootCert: string | undefined): { status: number | null; out: string } {
  const env: Record<string, string> = { HOME: dir, PGSSLROOTCERT: rootCert ?? join(dir, "none.pem") };
  return sh(
    [findPostgres().pgDump, "--schema-only", `--file=${join(dir, "dump.sql")}`, `--dbname=${databaseUrl}`],
    env,
  );
}

test("each app role connects with sslmode=verify-full and the internal CA in NODE_EXTRA_CA_CERTS: TLS 1.3", () => {
  for (const role of APP_ROLES) {
    const r = appConnect(url(role, "?sslmode=verify-full"), join(dir, "ca.pem"));
    expect({ role, ...r }).toEqual({ role, ok: true, ssl: true, version: "TLSv1.3" });
  }
});

test("verify-full refuses a server it cannot verify: no CA given, another CA, or a certificate for another address", () => {
  const noCa = appConnect(url("pipeline_gateway", "?sslmode=verify-full"), undefined);
  expect(noCa.ok).toBe(false);
  expect(noCa.error).toMatch(/unable to verify/);
  const stranger = appConnect(url("pipeline_gateway", "?sslmode=verify-full"), join(dir, "stranger.pem"));
  expect(stranger.ok).toBe(false);
  expect(stranger.error).toMatch(/unable to verify/);
  useCertificate("other");
  try {
    const wrongHost = appConnect(url("pipeline_gateway", "?sslmode=verify-full"), join(dir, "ca.pem"));
    expect(wrongHost.ok).toBe(false);
    expect(wrongHost.error).toMatch(/does not match certificate's altnames/);
    const dump = pgDump(url("pipeline_owner", "?sslmode=verify-full"), join(dir, "ca.pem"));
    expect(dump.status).not.toBe(0);
    expect(dump.out).toMatch(/does not match host name|server certificate/i);
  } finally {
    useCertificate("server");
  }
});

test("pg_hba refuses a connection without TLS (hostssl only), whatever the password", () => {
  const r = appConnect(url("pipeline_gateway", "?sslmode=disable"), join(dir, "ca.pem"));
  expect(r.ok).toBe(false);
  expect(r.error).toMatch(/no pg_hba\.conf entry/);
  expect(r.error).toMatch(/no encryption/);
  // An unknown role over TLS: no line either.
  const stranger = appConnect(
    `postgres://someone:${PASSWORD}@127.0.0.1:${port}/postgres?sslmode=verify-full`,
    join(dir, "ca.pem"),
  );
  expect(stranger.ok).toBe(false);
});

test("recovery's pg_dump (libpq) connects with the same URL and PGSSLROOTCERT; without the CA it refuses", () => {
  const ok = pgDump(url("pipeline_owner", "?sslmode=verify-full"), join(dir, "ca.pem"));
  expect({ status: ok.status, out: ok.out }).toEqual({ status: 0, out: "" });
  const noCa = pgDump(url("pipeline_owner", "?sslmode=verify-full"), undefined);
  expect(noCa.status).not.toBe(0);
  expect(noCa.out).toMatch(/root certificate file .* does not exist/);
});

test("why the URLs carry no sslrootcert=: postgres.js sends it to the server as a setting, which refuses it", () => {
  const r = appConnect(
    url("pipeline_gateway", `?sslmode=verify-full&sslrootcert=${encodeURIComponent(join(dir, "ca.pem"))}`),
    join(dir, "ca.pem"),
  );
  expect(r.ok).toBe(false);
  expect(r.error).toContain('unrecognized configuration parameter "sslrootcert"');
});
