// `npm run deploy -- secrets servers --hosts inventory.json [--region R] [--hub fsn1] --ssh-key FILE`:
// the servers' side of the store's secrets. NATS hosts get /etc/nats/passwords.env (their region's
// users, and leaf_remote outside the hub region), witness nodes theirs (system, admin,
// recovery_<region>), each written 0600 root through `sudo install ... /dev/stdin` and followed by a
// restart of nats-server when it changed, one host at a time. Postgres hosts get each app role's
// password as a SCRAM-SHA-256 verifier computed here, on psql's stdin: the password never reaches
// the server. As the inventory's user (`ops`, full sudo); host keys pinned as for the deploy.
import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createKnownHosts } from "./host-keys.ts";
import type { Host } from "./inventory.ts";
import { readInventory } from "./inventory.ts";
import { NATS_APP_USERS, NATS_SERVER_USERS, PG_ROLES } from "./secret-catalog.ts";
import { type StoreFile, valueOf } from "./secret-store.ts";
import { createSsh, type Ssh } from "./ssh.ts";

/** A region NATS server's passwords.env: its users, and the hub's `leaf` as `leaf_remote` elsewhere. */
export function natsPasswordsFile(store: StoreFile, region: string, hub: string): string {
  const users = [...NATS_SERVER_USERS, ...NATS_APP_USERS].map((u) => `${u}=${valueOf(store, `${region}/nats/${u}`)}`);
  if (region !== hub) users.push(`leaf_remote=${valueOf(store, `${hub}/nats/leaf`)}`);
  return `${users.join("\n")}\n`;
}

/** A witness node's passwords.env: system, admin, and each region's recovery_<region>. */
export function witnessPasswordsFile(store: StoreFile): string {
  const lines = [
    `system=${valueOf(store, "witness/nats/system")}`,
    `admin=${valueOf(store, "witness/nats/admin")}`,
    ...store.regions.map((r) => `recovery_${r}=${valueOf(store, `${r}/witness/recovery`)}`),
  ];
  return `${lines.join("\n")}\n`;
}

/**
 * A SCRAM-SHA-256 verifier as Postgres stores it (`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`,
 * RFC 5802/7677): what `ALTER ROLE ... PASSWORD` takes instead of the password.
 */
export function scramVerifier(password: string, salt = randomBytes(16), iterations = 4096): string {
  const salted = pbkdf2Sync(password.normalize("NFKC"), salt, iterations, 32, "sha256");
  const clientKey = createHmac("sha256", salted).update("Client Key").digest();
  const storedKey = createHash("sha256").update(clientKey).digest();
  const serverKey = createHmac("sha256", salted).update("Server Key").digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString("base64")}$${storedKey.toString("base64")}:${serverKey.toString("base64")}`;
}

/** The SQL that makes a region's four roles (and the `pipeline` database) and sets their passwords, for `psql -f -`. */
export function postgresRolesSql(
  store: StoreFile,
  region: string,
  /** The names used on the server (tests: names of their own in a shared cluster). */
  o: { role?: (r: string) => string; database?: string } = {},
): string {
  const name = o.role ?? ((r: string) => r);
  const db = o.database ?? "pipeline";
  const out = ["\\set ON_ERROR_STOP on"];
  for (const role of PG_ROLES) {
    const verifier = scramVerifier(valueOf(store, `${region}/postgres/${role}`));
    const extra = role === "pipeline_owner" ? " CREATEDB" : "";
    out.push(
      `SELECT format('CREATE ROLE %I LOGIN${extra}', '${name(role)}') WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${name(role)}') \\gexec`,
      `ALTER ROLE ${name(role)} LOGIN PASSWORD '${verifier}';`,
    );
  }
  out.push(
    `SELECT format('CREATE DATABASE %I OWNER %I', '${db}', '${name("pipeline_owner")}') WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '${db}') \\gexec`,
  );
  return `${out.join("\n")}\n`;
}

/** Writes `file` (0600 root) from stdin when it differs; prints `changed` or `unchanged`. */
const writeRootFile = (file: string) =>
  [
    `sudo -n install -m 0600 -o root -g root /dev/stdin ${file}.new`,
    `if sudo -n cmp -s ${file}.new ${file}; then sudo -n rm -f ${file}.new; echo unchanged; else sudo -n mv -f ${file}.new ${file}; echo changed; fi`,
  ].join("\n");

export interface ServersArgs {
  hosts: string;
  region?: string;
  hub?: string;
  sshKey?: string;
  healthTimeoutMs?: number;
}

/** Pushes the servers' secrets; returns the hosts that failed (each logged with its reason, never a value). */
export async function pushServerSecrets(
  store: StoreFile,
  a: ServersArgs,
  log: (m: string) => void,
  ssh?: Ssh,
): Promise<string[]> {
  const inventory = readInventory(a.hosts);
  const hub = a.hub ?? store.regions[0]!;
  const wanted = (h: Host) => !a.region || h.region === a.region || h.roles.includes("witness");
  const targets = inventory.hosts.filter((h) => wanted(h) && h.roles.some((r) => r !== "app"));
  const dir = mkdtempSync(join(tmpdir(), "secrets-servers-"));
  const failed: string[] = [];
  try {
    const knownHosts = createKnownHosts(join(dir, "known_hosts"));
    const s = ssh ?? createSsh({ knownHosts: knownHosts.file, ...(a.sshKey ? { key: a.sshKey } : {}) });
    for (const h of targets) {
      const say = (m: string) => log(`[${h.name}] ${m}`);
      try {
        const refused = ssh ? undefined : await knownHosts.pin(h);
        if (refused) throw new Error(refused);
        if (h.roles.includes("nats") || h.roles.includes("witness")) {
          const text = h.roles.includes("witness")
            ? witnessPasswordsFile(store)
            : natsPasswordsFile(store, h.region, hub);
          const said = (
            await s.check(h, "write passwords.env", writeRootFile("/etc/nats/passwords.env"), { stdin: text })
          ).trim();
          say(`/etc/nats/passwords.env ${said}`);
          if (said === "changed") await restartNats(s, h, a.healthTimeoutMs ?? 60_000, say);
        }
        if (h.roles.includes("postgres")) {
          await s.check(h, "Postgres roles", "sudo -n -u postgres psql -X -q -d postgres -f -", {
            stdin: postgresRolesSql(store, h.region),
          });
          say(`Postgres roles ${PG_ROLES.join(", ")}: passwords set (SCRAM verifiers), the pipeline database there`);
        }
      } catch (err) {
        say(`failed: ${(err as Error).message}`);
        failed.push(h.name);
        // A NATS cluster keeps its quorum: no further server is touched after one that failed.
        const rest = targets.slice(targets.indexOf(h) + 1).map((x) => x.name);
        if (rest.length) log(`stopping; not touched: ${rest.join(", ")}`);
        failed.push(...rest);
        break;
      }
    }
    return failed;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Restarts nats-server (a start re-renders the hashes) and waits for its /healthz (on the private address: its `http:`). */
async function restartNats(s: Ssh, h: Host, timeoutMs: number, say: (m: string) => void): Promise<void> {
  await s.check(h, "restart nats-server", "sudo -n systemctl restart nats-server");
  // Its monitoring port listens on the private address (the config's `http:`), not on loopback.
  const ip = h.privateIp ?? `$(sudo -n sed -n 's/^http: "\\(.*\\):8222"$/\\1/p' /etc/nats/nats.conf.tmpl)`;
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    if ((await s.run(h, `curl -fsS -m 2 http://${ip}:8222/healthz`, { timeoutMs: 10_000 })).code === 0)
      return say(`nats-server restarted, healthy after ${Date.now() - t0} ms`);
    await Bun.sleep(1000);
  }
  throw new Error(`nats-server not healthy within ${timeoutMs} ms after its restart: stopping here`);
}
