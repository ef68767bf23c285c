import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { CredentialsFile, NatsCredentials } from "@pipeline/shared/dev-stack-file";
import { NATS_ROLES, type NatsAuth, type NatsRole, rolePermissions } from "@pipeline/shared/nats";
import { waitForPort } from "./free-port.ts";
import { findNatsServer } from "./nats-binary.ts";

// The credentials file's format is @pipeline/shared/dev-stack-file's (the apps' CLIs read it).
export { type CredentialsFile, type NatsCredentials, readNatsCredentials } from "@pipeline/shared/dev-stack-file";

export interface NatsServerOptions {
  port: number;
  storeDir: string;
  name?: string;
  /** Regions whose streams and buckets the app users may touch (default: ["local"]). */
  regions?: string[];
  /** Address to listen on (default 127.0.0.1); a region's namespace address in two-region stacks. */
  host?: string;
  /** The JetStream domain (one per region when regions are joined by leafnodes). */
  domain?: string;
  /**
   * Leafnode links: `listenPort` accepts other regions' servers (as the `leaf` user of this
   * server), `remotes` connects to theirs (each with that server's `leaf` credentials).
   */
  leafnodes?: {
    listenPort?: number;
    /** Address of the leafnode listener (default: `host`); a region's inter-region interface. */
    listenHost?: string;
    /**
     * The address other regions should use (`host:port`). A server tells its leafnode peers
     * where it listens and they reconnect there: behind a relay or NAT, advertise the relay
     * (without it, a peer bypasses the relay after its first reconnect).
     */
    advertise?: string;
    remotes?: Array<{ host: string; port: number; credentials: NatsCredentials }>;
  };
  /**
   * A node of a JetStream cluster: its route listener (`host`:`port`), the routes to the other
   * nodes, and the address the others should use (`advertise`, as for leafnodes behind a relay).
   * Clients are not told the other nodes' addresses (`no_advertise`): they use the URLs they are given.
   */
  cluster?: {
    name: string;
    port: number;
    host?: string;
    advertise?: string;
    routes: Array<{ host: string; port: number }>;
  };
  /** Another server's credentials file to start from: the nodes of one cluster share their users. */
  credentialsFrom?: string;
  /** Runs the server inside this network namespace (`ip netns exec`). */
  netns?: string;
  log?: (m: string) => void;
}

export interface NatsServerHandle {
  /** `nats://127.0.0.1:<port>`: never carries credentials. */
  url: string;
  port: number;
  /** The server's version (`2.15.1`). */
  version: string;
  /** The 0600 file holding every user's password (see `readNatsCredentials`). */
  credentialsFile: string;
  /** What another region's server needs to connect to this one's leafnode port. */
  leafCredentials: NatsCredentials;
  /** Connection options of one role's user. */
  auth(role: NatsRole): NatsAuth;
  pid(): number | undefined;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
  /** SIGKILL: a crash, not a shutdown. */
  kill(): Promise<void>;
  /** Starts it again on the same port and store. */
  start(): Promise<void>;
}

/** The passwords of a store: read when present (a second start reuses them), else generated. */
function loadOrCreateCredentials(file: string): CredentialsFile {
  if (existsSync(file)) {
    const parsed = JSON.parse(readFileSync(file, "utf8")) as Partial<CredentialsFile>;
    if ([...NATS_ROLES, "system" as const, "leaf" as const].every((r) => typeof parsed[r]?.password === "string"))
      return parsed as CredentialsFile;
  }
  const creds = Object.fromEntries(
    [...NATS_ROLES, "system", "leaf"].map((r) => [r, { user: r, password: randomBytes(18).toString("base64url") }]),
  ) as CredentialsFile;
  writeFileSync(file, `${JSON.stringify(creds, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return creds;
}

/**
 * The server's configuration (JSON, which nats-server reads as its own format): a system account
 * and one PIPELINE account with JetStream, holding one user per app with the subject permissions
 * of `rolePermissions`. Passwords are stored as bcrypt hashes.
 */
export function natsServerConfig(o: {
  port: number;
  storeDir: string;
  name: string;
  regions: string[];
  creds: CredentialsFile;
  host?: string;
  domain?: string;
  leafnodes?: NatsServerOptions["leafnodes"];
  cluster?: NatsServerOptions["cluster"];
}): string {
  const hash = (p: string) => Bun.password.hashSync(p, { algorithm: "bcrypt", cost: 4 });
  const users: object[] = NATS_ROLES.map((role) => ({
    user: o.creds[role].user,
    password: hash(o.creds[role].password),
    permissions: rolePermissions(role, o.regions),
  }));
  // Another region's server connects as `leaf` and is bound to this account (full subjects: it
  // carries the other region's JetStream API through `$JS.<domain>.API`).
  if (o.leafnodes) users.push({ user: o.creds.leaf.user, password: hash(o.creds.leaf.password) });
  const host = o.host ?? "127.0.0.1";
  const leafnodes = o.leafnodes
    ? {
        ...(o.leafnodes.listenPort ? { listen: `${o.leafnodes.listenHost ?? host}:${o.leafnodes.listenPort}` } : {}),
        ...(o.leafnodes.advertise ? { advertise: o.leafnodes.advertise } : {}),
        ...(o.leafnodes.remotes?.length
          ? {
              remotes: o.leafnodes.remotes.map((r) => ({
                url: `nats-leaf://${encodeURIComponent(r.credentials.user)}:${encodeURIComponent(r.credentials.password)}@${r.host}:${r.port}`,
                account: "PIPELINE",
              })),
              reconnect: 1,
            }
          : {}),
      }
    : undefined;
  // Routes authenticate as the system user (every node of a cluster holds the same credentials).
  const route = o.creds.system;
  const cluster = o.cluster
    ? {
        name: o.cluster.name,
        listen: `${o.cluster.host ?? host}:${o.cluster.port}`,
        ...(o.cluster.advertise ? { advertise: o.cluster.advertise } : {}),
        no_advertise: true,
        authorization: { user: route.user, password: route.password },
        routes: o.cluster.routes.map(
          (r) =>
            `nats-route://${encodeURIComponent(route.user)}:${encodeURIComponent(route.password)}@${r.host}:${r.port}`,
        ),
      }
    : undefined;
  const config = {
    listen: `${host}:${o.port}`,
    server_name: o.name,
    jetstream: { store_dir: o.storeDir, ...(o.domain ? { domain: o.domain } : {}) },
    ...(leafnodes ? { leafnodes } : {}),
    ...(cluster ? { cluster } : {}),
    accounts: {
      SYS: { users: [{ user: o.creds.system.user, password: hash(o.creds.system.password) }] },
      PIPELINE: { jetstream: "enabled", users },
    },
    system_account: "SYS",
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}

/**
 * Runs a nats-server (>= MIN_NATS_SERVER) with JetStream and authentication on 127.0.0.1:port;
 * its store, config, credentials (0600) and log under storeDir.
 */
export async function startNatsServer(o: NatsServerOptions): Promise<NatsServerHandle> {
  const server = findNatsServer(o.log);
  mkdirSync(o.storeDir, { recursive: true, mode: 0o700 });
  const credentialsFile = join(o.storeDir, "credentials.json");
  if (o.credentialsFrom && !existsSync(credentialsFile))
    writeFileSync(credentialsFile, readFileSync(o.credentialsFrom), { mode: 0o600 });
  const creds = loadOrCreateCredentials(credentialsFile);
  const configFile = join(o.storeDir, "nats-server.conf");
  const name = o.name ?? `nats-${o.port}`;
  writeFileSync(
    configFile,
    natsServerConfig({
      port: o.port,
      storeDir: o.storeDir,
      name,
      regions: o.regions ?? ["local"],
      creds,
      ...(o.host ? { host: o.host } : {}),
      ...(o.domain ? { domain: o.domain } : {}),
      ...(o.leafnodes ? { leafnodes: o.leafnodes } : {}),
      ...(o.cluster ? { cluster: o.cluster } : {}),
    }),
    { mode: 0o600 },
  );
  chmodSync(configFile, 0o600);
  let child: ChildProcess | undefined;
  const exited = () =>
    new Promise<void>((res) => {
      if (!child || child.exitCode !== null || child.signalCode !== null) return res();
      child.once("exit", () => res());
    });
  const start = async () => {
    const out = openSync(join(o.storeDir, "nats-server.log"), "a");
    const argv = o.netns
      ? ["ip", "netns", "exec", o.netns, server.bin, "-c", configFile]
      : [server.bin, "-c", configFile];
    child = spawn(argv[0]!, argv.slice(1), { stdio: ["ignore", out, out] });
    child.unref();
    const failed = new Promise<never>((_, rej) =>
      child!.once("exit", (code) =>
        rej(new Error(`nats-server exited (code ${code}) at start; see ${join(o.storeDir, "nats-server.log")}`)),
      ),
    );
    failed.catch(() => {});
    await Promise.race([waitForPort(o.port, 15_000, o.host ?? "127.0.0.1"), failed]);
  };
  await start();
  const signal = async (sig: NodeJS.Signals) => {
    const done = exited();
    child?.kill(sig);
    await done;
  };
  return {
    url: `nats://${o.host ?? "127.0.0.1"}:${o.port}`,
    port: o.port,
    version: server.version,
    credentialsFile,
    leafCredentials: creds.leaf,
    auth: (role) => ({ user: creds[role].user, pass: creds[role].password }),
    pid: () => child?.pid,
    stop: () => signal("SIGTERM"),
    kill: () => signal("SIGKILL"),
    start,
  };
}

/** The environment an app of `role` needs to connect to this server (NATS_USER, NATS_PASSWORD). */
export function natsEnv(
  server: Pick<NatsServerHandle, "auth">,
  role: NatsRole,
): { NATS_USER: string; NATS_PASSWORD: string } {
  const a = server.auth(role);
  return { NATS_USER: a.user!, NATS_PASSWORD: a.pass! };
}
