// The operator's secrets for a rehearsal, made once per clone under .data/rehearsal/secrets/:
// our SSH key (the `ops` and `deploy` logins), the release signing key, the internal CA and the
// server certificates (NATS, Postgres, the load balancer; each with its private IP in the SANs),
// and every password (NATS users, Postgres roles, API keys, pepper, webhook secret).
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { DATA } from "./config.ts";
import { check } from "./exec.ts";

export const SECRETS = join(DATA, "secrets");

export interface Secrets {
  dir: string;
  /** Our SSH key: private key file, public key line. */
  sshKey: string;
  sshPub: string;
  /** The release signing key (npm run build --signing-key) and its public line. */
  signingKey: string;
  signingPub: string;
  caPem: string;
  passwords: Record<string, string>;
}

/** 24 characters of A-Z a-z 0-9 _ - (nats-render-config's rule; safe in URLs). */
const password = () => randomBytes(18).toString("base64url");
const hex = () => randomBytes(32).toString("hex");

function sshKeygen(file: string, comment: string): void {
  if (!existsSync(file)) check(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", file]);
}

export function ensureSecrets(): Secrets {
  const dir = SECRETS;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  sshKeygen(join(dir, "id_ed25519"), "rehearsal-operator");
  sshKeygen(join(dir, "release"), "captcha-pipeline-release");
  const ca = join(dir, "ca.pem");
  if (!existsSync(ca)) {
    check([
      "openssl",
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-days",
      "3650",
      "-subj",
      "/CN=captcha-pipeline rehearsal internal CA",
      "-keyout",
      join(dir, "ca-key.pem"),
      "-out",
      ca,
    ]);
  }
  const pwFile = join(dir, "passwords.json");
  if (!existsSync(pwFile)) {
    const p: Record<string, string> = {};
    for (const u of ["system", "admin", "gateway", "solver", "recovery", "rollout", "leaf"])
      p[`nats_${u}`] = password();
    for (const r of ["pipeline_owner", "pipeline_gateway", "pipeline_solver", "pipeline_rollout"])
      p[`pg_${r}`] = password();
    p.api_key = hex();
    p.api_key_pepper = hex();
    p.webhook_secret = hex();
    p.provider_key = hex();
    writeFileSync(pwFile, `${JSON.stringify(p, null, 2)}\n`, { mode: 0o600 });
  }
  return {
    dir,
    sshKey: join(dir, "id_ed25519"),
    sshPub: readFileSync(join(dir, "id_ed25519.pub"), "utf8").trim(),
    signingKey: join(dir, "release"),
    signingPub: readFileSync(join(dir, "release.pub"), "utf8").trim(),
    caPem: readFileSync(ca, "utf8"),
    passwords: JSON.parse(readFileSync(pwFile, "utf8")),
  };
}

/**
 * A server certificate of the internal CA for `name` with `ip` (and `alsoNames`: a load balancer's
 * shared name) in its SANs: { cert, key } PEMs. Made again when the names it must carry changed.
 */
export function serverCertificate(
  s: Secrets,
  name: string,
  ip: string,
  alsoNames: string[] = [],
): { cert: string; key: string } {
  const base = join(s.dir, `server-${name}`);
  const ext = `${base}.ext`;
  const extText = `subjectAltName=IP:${ip},${[name, ...alsoNames].map((n) => `DNS:${n}`).join(",")}\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature,keyEncipherment\nbasicConstraints=CA:FALSE\n`;
  if (!existsSync(`${base}.pem`) || !existsSync(ext) || readFileSync(ext, "utf8") !== extText) {
    writeFileSync(ext, extText);
    check([
      "openssl",
      "req",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-subj",
      `/CN=${name}`,
      "-keyout",
      `${base}-key.pem`,
      "-out",
      `${base}.csr`,
    ]);
    check([
      "openssl",
      "x509",
      "-req",
      "-in",
      `${base}.csr`,
      "-CA",
      join(s.dir, "ca.pem"),
      "-CAkey",
      join(s.dir, "ca-key.pem"),
      "-CAcreateserial",
      "-days",
      "825",
      "-extfile",
      ext,
      "-out",
      `${base}.pem`,
    ]);
  }
  return { cert: readFileSync(`${base}.pem`, "utf8"), key: readFileSync(`${base}-key.pem`, "utf8") };
}

/** A host's SSH host key pair, made per `up` (a new machine has a new key, as a new server would). */
export function hostKeyPair(dir: string, name: string): { private: string; public: string } {
  const file = join(dir, `ssh_host_ed25519_key_${name}`);
  check(["rm", "-f", file, `${file}.pub`]);
  check(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", `root@${name}`, "-f", file]);
  return { private: readFileSync(file, "utf8"), public: readFileSync(`${file}.pub`, "utf8") };
}

/**
 * Where the apps' secrets come from. `env`: the rehearsal's own passwords, written into the env
 * files (the templates hold `<...>` placeholders for them). `store`: the operator's secrets store of
 * `npm run deploy -- secrets` (infra/deploy/cli/secret-store.ts), which the deploy command turns
 * into systemd credentials; the rehearsal makes it with the project's own command, outside the
 * clone (the store refuses a path inside it), and reads the servers' side (NATS, Postgres) from it.
 */
export interface SecretSource {
  mode: "env" | "store";
  /** The store file (mode store): `--secrets` of each deploy. */
  store?: string;
  /** A region's NATS user's password, a region's Postgres role's. */
  nats(user: string, region: string): string;
  pg(role: string, region: string): string;
  /** A witness node's own users (`system`, `admin`), and `recovery_<region>` (that region's lease). */
  witness(user: string): string;
  apiKey: string;
}

/** The clone's store for a set of regions (a store made for fsn1 alone has no hel1 secrets). */
export function storeFile(repo: string, regions: string[] = ["fsn1"]): string {
  const tag = createHash("sha256").update(repo).digest("hex").slice(0, 10);
  const name = regions.join(",") === "fsn1" ? "secrets.json" : `secrets-${regions.join("-")}.json`;
  return join(homedir(), ".config", "captcha-pipeline-rehearsal", tag, name);
}

export function secretSource(repo: string, s: Secrets, regions: string[], log: (m: string) => void): SecretSource {
  if (!existsSync(join(repo, "infra", "deploy", "cli", "secret-store.ts"))) {
    const p = s.passwords;
    return {
      mode: "env",
      nats: (u) => p[`nats_${u}`]!,
      pg: (r) => p[`pg_${r}`]!,
      witness: (u) => p[`nats_${u.startsWith("recovery_") ? "recovery" : u}`]!,
      apiKey: p.api_key!,
    };
  }
  const store = storeFile(repo, regions);
  if (!existsSync(store)) {
    mkdirSync(join(store, ".."), { recursive: true, mode: 0o700 });
    log(`$ npm run deploy -- secrets init --regions ${regions.join(",")} --store ${store}`);
    check(
      ["node", "infra/bootstrap.mjs", "deploy", "secrets", "init", "--regions", regions.join(","), "--store", store],
      { cwd: repo },
    );
  }
  const file = JSON.parse(readFileSync(store, "utf8")) as { secrets: Record<string, { value: string }> };
  const value = (name: string) => {
    const v = file.secrets[name]?.value;
    if (v === undefined) throw new Error(`the secrets store ${store} has no ${name}`);
    return v;
  };
  return {
    mode: "store",
    store,
    nats: (u, r) => value(`${r}/nats/${u}`),
    pg: (role, r) => value(`${r}/postgres/${role}`),
    witness: (u) => {
      const lease = /^recovery_([a-z0-9]+)$/.exec(u);
      return value(lease ? `${lease[1]}/witness/recovery` : `witness/nats/${u}`);
    },
    apiKey: value("api-keys").split(",")[0]!,
  };
}
