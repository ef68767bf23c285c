// The operator's steps after the hosts' first boot (docs/deploy.md, "Secrets"), done as `ops`
// with sudo over SSH: the NATS server's TLS files and passwords, then its start; Postgres' TLS
// files, the four roles and the database; the app host's internal CA, env files (from
// infra/deploy/env/*.env.example) and provider keys. Values for one region (fsn1, 10.77.1.x).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type HostSpec, SHARED_NAME } from "./config.ts";
import { envTemplate, hasPlaceholder, renderEnvTemplate } from "./envfiles.ts";
import type { Log } from "./exec.ts";
import { waitFor } from "./exec.ts";
import { asOps, asOpsChecked, putFile } from "./ops-ssh.ts";
import { type SecretSource, type Secrets, serverCertificate } from "./secrets.ts";

export interface Topology {
  region: string;
  regions: string[];
  /** The region whose NATS servers take the others' leafnode connections (Terraform's leaf_hub_region). */
  hub: string;
  /** The witness node (two regions or more). */
  witness?: HostSpec;
  /** Every other region's NATS servers and Postgres (the rollout reaches them). */
  others: Array<{ region: string; nats: HostSpec[]; postgres: HostSpec }>;
  nats: HostSpec[];
  postgres: HostSpec;
  apps: HostSpec[];
  lb: HostSpec;
  /** Every region's LB address: each sends its backup traffic to the other regions' gateways. */
  lbs: string[];
  providerUrl: string;
}

const NATS_USERS = ["system", "admin", "gateway", "solver", "recovery", "rollout", "leaf"];

/** passwords.env of a region's NATS server: its users; outside the hub, `leaf_remote` = the hub's `leaf`. */
export function natsPasswords(h: HostSpec, t: Pick<Topology, "hub" | "regions">, src: SecretSource): string {
  if (h.role === "witness")
    return ["system", "admin", ...t.regions.map((r) => `recovery_${r}`)]
      .map((u) => `${u}=${src.witness(u)}`)
      .join("\n");
  const own = NATS_USERS.map((u) => `${u}=${src.nats(u, h.region)}`);
  return [...own, ...(h.region === t.hub ? [] : [`leaf_remote=${src.nats("leaf", t.hub)}`])].join("\n");
}

export async function setUpNats(h: HostSpec, t: Topology, s: Secrets, src: SecretSource, log: Log): Promise<void> {
  const { cert, key } = serverCertificate(s, h.name, h.ip);
  const passwords = natsPasswords(h, t, src);
  asOpsChecked(
    h,
    s.sshKey,
    "NATS TLS files and passwords",
    [
      putFile("/etc/nats/tls/ca.pem", s.caPem, "0644"),
      putFile("/etc/nats/tls/server.pem", cert, "0644"),
      putFile("/etc/nats/tls/server-key.pem", key, "0640", "root", "nats"),
      putFile("/etc/nats/passwords.env", `${passwords}\n`, "0600"),
      "systemctl start nats-server.service",
    ].join("\n"),
  );
  await waitFor(
    `${h.name}: nats-server healthy (JetStream)`,
    60_000,
    () =>
      asOps(h, s.sshKey, `curl -fsS -m 2 'http://${h.ip}:8222/healthz?js-enabled-only=true'`).code === 0
        ? true
        : undefined,
    1000,
  );
  log(`${h.name}: nats-server up (TLS, passwords, JetStream)`);
}

export async function setUpPostgres(h: HostSpec, s: Secrets, src: SecretSource, log: Log): Promise<void> {
  const { cert, key } = serverCertificate(s, h.name, h.ip);
  asOpsChecked(
    h,
    s.sshKey,
    "Postgres TLS files",
    [
      putFile("/etc/postgresql/tls/server.pem", cert, "0644"),
      putFile("/etc/postgresql/tls/server-key.pem", key, "0640", "root", "postgres"),
      "systemctl restart postgresql.service",
    ].join("\n"),
  );
  await waitFor(
    `${h.name}: postgres accepting connections`,
    60_000,
    () => (asOps(h, s.sshKey, "pg_isready -q -h /var/run/postgresql").code === 0 ? true : undefined),
    1000,
  );
  const pw = (r: string) => src.pg(r, h.region);
  const sql = [
    `CREATE ROLE pipeline_owner LOGIN CREATEDB PASSWORD '${pw("pipeline_owner")}';`,
    `CREATE DATABASE pipeline OWNER pipeline_owner;`,
    ...["pipeline_gateway", "pipeline_solver", "pipeline_rollout"].map(
      (r) => `CREATE ROLE ${r} LOGIN PASSWORD '${pw(r)}';`,
    ),
  ].join("\n");
  asOpsChecked(
    h,
    s.sshKey,
    "Postgres roles and database",
    "cd / && runuser -u postgres -- psql -v ON_ERROR_STOP=1 -q -f -",
    { input: sql },
  );
  postgresExporter(h, s, log);
  log(`${h.name}: postgres up (TLS, roles pipeline_owner/gateway/solver/rollout, database pipeline)`);
}

/**
 * The Postgres exporter (postgres.yaml installs Debian's prometheus-postgres-exporter and writes its
 * DATA_SOURCE_NAME: peer over the socket as `prometheus`): the role is the operator's step
 * (docs/deploy.md, "Postgres roles"). The exporter then reads pg_up 1 at its next scrape.
 */
function postgresExporter(h: HostSpec, s: Secrets, log: Log): void {
  const unit = "prometheus-postgres-exporter.service";
  if (asOps(h, s.sshKey, `systemctl cat ${unit} >/dev/null 2>&1`).code !== 0) return;
  asOpsChecked(
    h,
    s.sshKey,
    "the Postgres exporter's role",
    [
      `cd / && runuser -u postgres -- psql -v ON_ERROR_STOP=1 -q -c "CREATE ROLE prometheus LOGIN IN ROLE pg_monitor"`,
      `systemctl is-active --quiet ${unit}`,
    ].join("\n"),
  );
  log(`${h.name}: prometheus-postgres-exporter: role prometheus (its DATA_SOURCE_NAME is postgres.yaml's)`);
}

/**
 * The env files of an app host, rendered from the project's templates. The secrets go in only
 * where a template has their key (env mode); with the secrets store they reach the apps as
 * systemd credentials, written by the deploy command, and the DATABASE_URLs carry no password.
 */
export function appEnvFiles(
  repo: string,
  h: HostSpec,
  t: Topology,
  s: Secrets,
  src: SecretSource,
): Record<string, string> {
  const p = s.passwords;
  const ca = "/etc/ssl/captcha-pipeline/internal-ca.pem";
  const natsUrl = t.nats.map((n) => `tls://${n.ip}:4222`).join(",");
  const db = (app: string, role: string) => {
    const withPassword = hasPlaceholder(envTemplate(repo, app), "DATABASE_URL");
    return `postgres://${role}${withPassword ? `:${src.pg(role, t.region)}` : ""}@${t.postgres.ip}:5432/pipeline?sslmode=verify-full`;
  };
  const render = (app: string, values: Record<string, string>, secrets: Record<string, string>, drop: string[] = []) =>
    renderEnvTemplate(envTemplate(repo, app), values, { ifPresent: secrets, drop });
  // The witness (two regions): its one node's URL, this region's lease user, 1 replica of `leases`.
  const witnessValues: Record<string, string> = t.witness
    ? { WITNESS_URL: `tls://${t.witness.ip}:4222`, WITNESS_USER: `recovery_${t.region}`, WITNESS_REPLICAS: "1" }
    : {};
  const witness = t.witness ? [] : ["WITNESS_URL", "WITNESS_USER", "WITNESS_PASSWORD", "WITNESS_REPLICAS"];
  return {
    common: render(
      "common",
      {
        REGION: t.region,
        REGIONS: t.regions.join(","),
        NATS_URL: natsUrl,
        NATS_TLS_CA: ca,
        NODE_EXTRA_CA_CERTS: ca,
        PGSSLROOTCERT: ca,
        STREAM_REPLICAS: String(Math.min(3, t.nats.length)),
      },
      {},
    ),
    gateway: render(
      "gateway",
      {
        DATABASE_URL: db("gateway", "pipeline_gateway"),
        GATEWAY_METRICS_HOST: h.ip,
        GATEWAY_TRUSTED_PROXIES: t.lbs.join(","),
      },
      {
        NATS_PASSWORD: src.nats("gateway", t.region),
        API_KEYS: src.apiKey,
        API_KEY_PEPPER: p.api_key_pepper!,
        WEBHOOK_SECRET: p.webhook_secret!,
      },
    ),
    solver: render(
      "solver",
      { DATABASE_URL: db("solver", "pipeline_solver"), PROVIDER_URL: t.providerUrl },
      { NATS_PASSWORD: src.nats("solver", t.region), WEBHOOK_SECRET: p.webhook_secret! },
    ),
    recovery: render(
      "recovery",
      {
        DATABASE_URL: db("recovery", "pipeline_owner"),
        SNAPSHOT_OFFHOST: "none",
        RECOVERY_METRICS_HOST: h.ip,
        ...witnessValues,
      },
      {
        NATS_PASSWORD: src.nats("recovery", t.region),
        ...(t.witness ? { WITNESS_PASSWORD: src.witness(`recovery_${t.region}`) } : {}),
      },
      witness,
    ),
    // On the home region's first app host only: rollout.service starts where its env file is (docs/deploy.md).
    ...(h.name === t.apps[0]?.name && t.region === t.hub ? { rollout: rolloutEnv(repo, h, t, render, db) } : {}),
  };
}

/** rollout.env: its own region's database, and each other region's NATS and database (the template's `_HEL1` keys). */
function rolloutEnv(
  repo: string,
  h: HostSpec,
  t: Topology,
  render: (app: string, values: Record<string, string>, secrets: Record<string, string>, drop?: string[]) => string,
  db: (app: string, role: string) => string,
): string {
  const other: Record<string, string> = {};
  for (const o of t.others) {
    const R = o.region.toUpperCase();
    other[`NATS_URL_${R}`] = o.nats.map((n) => `tls://${n.ip}:4222`).join(",");
    other[`NATS_TLS_CA_${R}`] = "/etc/ssl/captcha-pipeline/internal-ca.pem";
    other[`NATS_USER_${R}`] = "rollout";
    other[`DATABASE_URL_${R}`] = `postgres://pipeline_rollout@${o.postgres.ip}:5432/pipeline?sslmode=verify-full`;
  }
  const templateOthers = ["NATS_URL_HEL1", "NATS_TLS_CA_HEL1", "NATS_USER_HEL1", "DATABASE_URL_HEL1"];
  if (t.others.some((o) => o.region !== "hel1"))
    throw new Error(
      `rollout.env's template names hel1's settings; the rehearsal's other region must be hel1 (${repo})`,
    );
  return render(
    "rollout",
    { DATABASE_URL: db("rollout", "pipeline_rollout"), ROLLOUT_HTTP_HOST: h.ip, ...other },
    {},
    t.others.length ? [] : templateOthers,
  );
}

export function setUpApp(repo: string, h: HostSpec, t: Topology, s: Secrets, src: SecretSource, log: Log): void {
  const env = appEnvFiles(repo, h, t, s, src);
  asOpsChecked(
    h,
    s.sshKey,
    "internal CA, env files, provider keys",
    [
      "install -d -m 0755 -o root -g root /etc/ssl/captcha-pipeline",
      putFile("/etc/ssl/captcha-pipeline/internal-ca.pem", s.caPem, "0644"),
      ...Object.entries(env).map(([name, text]) => putFile(`/etc/captcha-pipeline/${name}.env`, text, "0600")),
      putFile(
        "/etc/captcha-pipeline-solver/provider-keys.json",
        `${JSON.stringify({ default: s.passwords.provider_key })}\n`,
        "0640",
        "root",
        "pipeline-solver",
      ),
    ].join("\n"),
  );
  log(
    `${h.name}: internal CA, ${Object.keys(env)
      .map((n) => `${n}.env`)
      .join(", ")}, provider-keys.json`,
  );
}

/**
 * `recovery migrate` on an app host, as recovery's user with its unit's env files and (store mode)
 * its credentials: docs/deploy.md's systemd-run line.
 */
export function migrate(h: HostSpec, s: Secrets, src: SecretSource): string {
  const credentials =
    src.mode === "store" ? " -p LoadCredential=recovery:/etc/captcha-pipeline/credentials/recovery" : "";
  return asOpsChecked(
    h,
    s.sshKey,
    "recovery migrate",
    `systemd-run --pipe --wait --collect --quiet --uid=pipeline-recovery --gid=pipeline-recovery -p EnvironmentFile=/etc/captcha-pipeline/common.env -p EnvironmentFile=/etc/captcha-pipeline/recovery.env${credentials} /opt/captcha-pipeline/recovery/current/recovery migrate`,
    { timeoutMs: 180_000 },
  );
}

/** The LB's certificate: its own name and address, and the shared name (dns-server.ts) it answers for. */
export const lbCertificate = (s: Secrets, lb: HostSpec) => {
  const { cert, key } = serverCertificate(s, lb.name, lb.ip, [SHARED_NAME]);
  return `${cert.trim()}\n${key.trim()}\n`;
};

export const caFile = (s: Secrets) => join(s.dir, "ca.pem");

/** KEY=VALUE lines of an env file as systemd reads them (one pair of surrounding quotes removed). */
export function parseEnv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of text.matchAll(/^([A-Z][A-Z0-9_]*)=(.*)$/gm)) out[m[1]!] = m[2]!.replace(/^'(.*)'$|^"(.*)"$/, "$1$2");
  return out;
}

/**
 * `recovery migrate` from this clone over the private network, before any app runs (docs/deploy.md:
 * `npm run recovery -- migrate` "given the private network, the internal CA in NODE_EXTRA_CA_CERTS
 * and the same DATABASE_URL"): the app host's common.env and recovery.env, the CA path the host's.
 */
export function migrateFromClone(repo: string, h: HostSpec, t: Topology, s: Secrets, src: SecretSource): string {
  const env = appEnvFiles(repo, h, t, s, src);
  const vars = { ...parseEnv(env.common!), ...parseEnv(env.recovery!) };
  for (const k of ["NATS_TLS_CA", "NODE_EXTRA_CA_CERTS", "PGSSLROOTCERT"]) vars[k] = caFile(s);
  // The store's secrets reach the app as systemd credentials: here a folder of our own, as systemd makes it.
  const creds = mkdtempSync(join(tmpdir(), "rehearsal-credentials-"));
  try {
    if (src.mode === "store") {
      writeFileSync(join(creds, "NATS_PASSWORD"), src.nats("recovery", t.region), { mode: 0o600 });
      writeFileSync(join(creds, "DATABASE_PASSWORD"), src.pg("pipeline_owner", t.region), { mode: 0o600 });
      if (t.witness)
        writeFileSync(join(creds, "WITNESS_PASSWORD"), src.witness(`recovery_${t.region}`), { mode: 0o600 });
      vars.CREDENTIALS_DIRECTORY = creds;
    }
    const r = Bun.spawnSync([process.execPath, "apps/recovery/src/cli.ts", "migrate"], {
      cwd: repo,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/root", ...vars },
    });
    const out = `${r.stdout.toString()}${r.stderr.toString()}`.trim();
    if (r.exitCode !== 0)
      throw new Error(
        `recovery migrate (from the clone) failed (exit ${r.exitCode}):\n${out.split("\n").slice(-15).join("\n")}`,
      );
    return out;
  } finally {
    rmSync(creds, { recursive: true, force: true });
  }
}
