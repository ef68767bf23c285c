// The host's side of the rehearsal, bound on the bridge address: the provider emulator
// (packages/emulator, "the internet" the solvers call) and the artifact server (the nats-server
// tarball the NATS hosts download at boot). Both run detached, so that `up` can return; their
// pids are in state.json and `down` stops them.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  closeSync,
  copyFileSync,
  createReadStream,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
} from "node:fs";
import { join } from "node:path";
import { findNatsServer, natsServerVersion } from "@pipeline/devstack";
import {
  ALERT_PORT,
  ARTIFACT_PORT,
  BRIDGE_IP,
  DATA,
  DNS_PORT,
  DNS_STATUS_PORT,
  EMULATOR_PORT,
  REPO,
  SHARED_NAME,
  SHARED_ZONE,
} from "./config.ts";
import { check, type Log, waitFor } from "./exec.ts";

export interface NatsArtifact {
  version: string;
  sha256: string;
  url: string;
}

const sha256 = (file: string) =>
  new Promise<string>((resolve, reject) => {
    const h = createHash("sha256");
    createReadStream(file)
      .on("data", (d) => h.update(d))
      .on("end", () => resolve(h.digest("hex")))
      .on("error", reject);
  });

/**
 * nats-server as GitHub publishes it (`nats-server-v<version>-linux-amd64.tar.gz`, the binary in a
 * folder of the same name), made from the binary the project already fetches (findNatsServer:
 * NATS_SERVER_BIN, PATH, or Debian's package), with its sha256 for the install script's check.
 */
export async function natsArtifact(log: Log): Promise<NatsArtifact> {
  const found = findNatsServer(log);
  const version = natsServerVersion(found.bin)?.replace(/^v/, "");
  if (!version || !/^\d+\.\d+\.\d+$/.test(version))
    throw new Error(`${found.bin}: cannot read its version (${version})`);
  const dir = join(DATA, "artifacts");
  const name = `nats-server-v${version}-linux-amd64`;
  const tarball = join(dir, `${name}.tar.gz`);
  if (!existsSync(tarball)) {
    const work = join(dir, ".work");
    rmSync(work, { recursive: true, force: true });
    mkdirSync(join(work, name), { recursive: true });
    copyFileSync(found.bin, join(work, name, "nats-server"));
    check(["tar", "-czf", `${tarball}.tmp`, "-C", work, "--owner=0", "--group=0", name]);
    check(["mv", `${tarball}.tmp`, tarball]);
    rmSync(work, { recursive: true, force: true });
  }
  return { version, sha256: await sha256(tarball), url: `http://${BRIDGE_IP}:${ARTIFACT_PORT}/${name}.tar.gz` };
}

function detached(name: string, argv: string[], env: Record<string, string>): number {
  const logs = join(DATA, "logs");
  mkdirSync(logs, { recursive: true });
  const out = openSync(join(logs, `${name}.log`), "a");
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: REPO,
    detached: true,
    stdio: ["ignore", out, out],
    env: { ...process.env, ...env },
  });
  child.unref();
  closeSync(out);
  return child.pid!;
}

async function listening(what: string, url: string, pid: number, logFile: string): Promise<void> {
  await waitFor(what, 20_000, async () => {
    try {
      process.kill(pid, 0);
    } catch {
      throw new Error(`${what} exited at start:\n${readFileSync(logFile, "utf8").slice(-1500)}`);
    }
    return fetch(url, { signal: AbortSignal.timeout(1000) }).then(
      () => true,
      () => undefined,
    );
  });
}

export interface HostServices {
  emulatorPid: number;
  emulatorUrl: string;
  artifactsPid: number;
  /** The provider key the solvers use (one of EMULATOR_KEYS). */
  providerKey: string;
}

export async function startHostServices(providerKey: string, log: Log): Promise<HostServices> {
  const bun = process.execPath;
  const emulatorPid = detached("emulator", [bun, "packages/emulator/src/main.ts"], {
    EMULATOR_HOST: BRIDGE_IP,
    EMULATOR_PORT: String(EMULATOR_PORT),
    EMULATOR_KEYS: `${providerKey}:50`,
    EMULATOR_LATENCY_MS: "500",
  });
  const artifactsPid = detached(
    "artifacts",
    [bun, "infra/rehearsal/serve-artifacts.ts", join(DATA, "artifacts"), BRIDGE_IP, String(ARTIFACT_PORT)],
    {},
  );
  const emulatorUrl = `http://${BRIDGE_IP}:${EMULATOR_PORT}`;
  await listening("the provider emulator", emulatorUrl, emulatorPid, join(DATA, "logs", "emulator.log"));
  await listening(
    "the artifact server",
    `http://${BRIDGE_IP}:${ARTIFACT_PORT}/`,
    artifactsPid,
    join(DATA, "logs", "artifacts.log"),
  );
  log(
    `host services: emulator ${emulatorUrl} (pid ${emulatorPid}), artifacts http://${BRIDGE_IP}:${ARTIFACT_PORT}/ (pid ${artifactsPid})`,
  );
  return { emulatorPid, emulatorUrl, artifactsPid, providerKey };
}

/**
 * The alert receiver (infra/monitoring/alert-receiver.ts) on the bridge: the far end of the fleet's
 * Alertmanager (its webhook, Slack's JSON). It prints `alert <name> after S s` into logs/alerts.log.
 */
export async function startAlertReceiver(log: Log): Promise<{ pid: number; url: string; logFile: string }> {
  const pid = detached(
    "alerts",
    [process.execPath, "infra/monitoring/alert-receiver.ts", "--host", BRIDGE_IP, "--port", String(ALERT_PORT)],
    {},
  );
  const url = `http://${BRIDGE_IP}:${ALERT_PORT}`;
  const logFile = join(DATA, "logs", "alerts.log");
  await listening("the alert receiver", `${url}/alerts`, pid, logFile);
  log(`alert receiver: ${url}/alerts/hook (pid ${pid}), notifications in ${logFile}`);
  return { pid, url, logFile };
}

/**
 * The failover name server (dns-server.ts) on the bridge: SHARED_NAME answered with the regions'
 * LBs that pass `/readyz/accepting`, TTL 5 s. Clients of the shared name resolve it there.
 */
export async function startNameServer(
  lbs: Array<{ region: string; ip: string }>,
  caFile: string,
  log: Log,
): Promise<{ pid: number; server: string; statusUrl: string; logFile: string }> {
  const pid = detached(
    "dns",
    [
      process.execPath,
      "infra/rehearsal/dns-server.ts",
      ...["--host", BRIDGE_IP, "--port", String(DNS_PORT), "--status-port", String(DNS_STATUS_PORT)],
      ...["--zone", SHARED_ZONE, "--name", SHARED_NAME, "--ttl", "5", "--ca", caFile],
      ...lbs.flatMap((l) => ["--lb", `${l.region}=${l.ip}`]),
    ],
    {},
  );
  const statusUrl = `http://${BRIDGE_IP}:${DNS_STATUS_PORT}/status`;
  const logFile = join(DATA, "logs", "dns.log");
  await listening("the failover name server", statusUrl, pid, logFile);
  log(`name server: ${SHARED_NAME} on ${BRIDGE_IP}:${DNS_PORT} (pid ${pid}), changes in ${logFile}`);
  return { pid, server: `${BRIDGE_IP}:${DNS_PORT}`, statusUrl, logFile };
}

export function stopPid(pid: number | undefined, expect: string): void {
  if (!pid) return;
  try {
    if (!readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(expect)) return;
    process.kill(pid, "SIGTERM");
  } catch {}
}
