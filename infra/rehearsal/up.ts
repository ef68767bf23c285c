// `npm run rehearse -- up|down|status`: the whole rehearsal, from the steps of the other modules.
// up: image -> secrets -> bridge + host services -> user-data -> machines booted (systemd, cloud-init)
// -> operator steps (NATS, Postgres, app env files) -> binaries -> migrate -> `npm run deploy`
// (recovery, gateway, solver; unchanged) -> the LB sees a healthy gateway -> one task through the LB.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type LbClient, nameLookup, readyz, roundTrip } from "./client.ts";
import {
  BRIDGE_IP,
  DATA,
  EMULATOR_PORT,
  fleetOf,
  type HostSpec,
  LB_ADMIN_PORT,
  machineName,
  NO_LB_INVENTORY,
  REPO,
  SHARED_NAME,
  SUBNET,
} from "./config.ts";
import { check, type Log, run, waitFor } from "./exec.ts";
import { acquireFleet, otherFleet, releaseFleet } from "./fleet-lock.ts";
import { natsArtifact, startAlertReceiver, startHostServices, startNameServer, stopPid } from "./host-services.ts";
import { ensureHostTools } from "./host-tools.ts";
import { ensureImage, packagesOf } from "./image.ts";
import { inMachine, startMachine, stopMachine, waitBooted } from "./machine.ts";
import { setUpMonitoring } from "./monitoring.ts";
import { bridgeExists, bridgePorts, createBridge, removeBridge } from "./network.ts";
import {
  caFile,
  lbCertificate,
  migrate,
  migrateFromClone,
  setUpApp,
  setUpNats,
  setUpPostgres,
  type Topology,
} from "./operator.ts";
import { pinHostKey, resetKnownHosts } from "./ops-ssh.ts";
import { ensureSecrets, hostKeyPair, type SecretSource, type Secrets, secretSource } from "./secrets.ts";
import { clearState, type HostState, readState, type State, writeState } from "./state.ts";
import { templatefile } from "./templatefile.ts";
import { renderUserData } from "./userdata.ts";

export const VERSION = "v1";
export const DEPLOY_ORDER = ["recovery", "gateway", "solver"] as const;
/** Built with them, deployed after them on one app host. */
const ROLLOUT = "rollout";

export interface UpResult {
  state: State;
  client: LbClient;
  firstTask: { id: string; status: string; ms: number };
}

const secondsSince = (t0: number) => Math.round((Date.now() - t0) / 100) / 10;

/** One region's part of the fleet, and what it knows of the others (the rollout's NATS and databases, the witness). */
export function topologyOf(all: HostSpec[], region: string, regions: string[]): Topology {
  const of = (r: string, role: string) => all.filter((h) => h.region === r && h.role === role);
  return {
    region,
    regions,
    hub: regions[0]!,
    witness: all.find((h) => h.role === "witness"),
    others: regions
      .filter((r) => r !== region)
      .map((r) => ({ region: r, nats: of(r, "nats"), postgres: of(r, "postgres")[0]! })),
    nats: of(region, "nats"),
    postgres: of(region, "postgres")[0]!,
    apps: of(region, "app"),
    lb: of(region, "lb")[0]!,
    lbs: all.filter((h) => h.role === "lb").map((h) => h.ip),
    providerUrl: `http://${BRIDGE_IP}:${EMULATOR_PORT}`,
  };
}

/** The deploy command's inventory (infra/deploy/cli/inventory.ts): the hosts' addresses and pinned keys. */
function writeInventory(hosts: HostState[]): string {
  const file = join(DATA, "inventory.json");
  const entries = hosts
    // The LB is not the deploy's; the monitoring host is wired by monitoring.ts, not by `npm run deploy`.
    .filter((h) => h.role !== "lb" && h.role !== "monitoring")
    .map((h) => ({
      name: h.name,
      region: h.region,
      roles: [h.role],
      ssh: { host: h.ip, user: "deploy" },
      hostKeys: [h.hostKey.trim().split(/\s+/).slice(0, 2).join(" ")],
      privateIp: h.ip,
    }));
  // The gateway's deploy drains each app host through HAProxy's runtime API (gapless.ts); the
  // inventory without `lb` restarts in place (the old way, measured by `deploy-gapless --no-drain`).
  // One region: its LB; two: each region's own (a host drains through its region's LB).
  const lbs = hosts.filter((h) => h.role === "lb");
  const one = (lb: HostSpec) => ({ kind: "haproxy", admin: `${lb.ip}:${LB_ADMIN_PORT}`, backend: "gateways" });
  const withLb =
    lbs.length === 1 ? { lb: one(lbs[0]!) } : { lb: Object.fromEntries(lbs.map((lb) => [lb.region, one(lb)])) };
  writeFileSync(file, `${JSON.stringify({ hosts: entries, ...withLb }, null, 2)}\n`);
  writeFileSync(NO_LB_INVENTORY, `${JSON.stringify({ hosts: entries }, null, 2)}\n`);
  return file;
}

/** The inventory with one app host, the rollout's (docs/deploy.md: deploy it where rollout.env is). */
export function rolloutInventory(inventory: string, host: string): string {
  const inv = JSON.parse(readFileSync(inventory, "utf8")) as { hosts: Array<{ name: string; roles: string[] }> };
  const file = join(DATA, "inventory-rollout.json");
  const hosts = inv.hosts.filter((h) => !h.roles.includes("app") || h.name === host);
  writeFileSync(file, `${JSON.stringify({ hosts }, null, 2)}\n`);
  return file;
}

/** Runs a project command through its own entry point (node infra/bootstrap.mjs ...), output to stderr. */
function npmRun(args: string[], log: Log, env: Record<string, string> = {}): void {
  log(`$ npm run ${args[0]} -- ${args.slice(1).join(" ")}`);
  const r = spawnSync("node", ["infra/bootstrap.mjs", ...args], {
    cwd: REPO,
    stdio: ["ignore", 2, 2],
    env: { ...process.env, ...env },
    timeout: 1_200_000,
  });
  if (r.status !== 0) throw new Error(`npm run ${args.join(" ")}: exit ${r.status ?? r.signal}`);
}

/** The apps' binaries of this commit, built once into .data/rehearsal/dist/<commit> (REHEARSAL_REBUILD=1 rebuilds). */
function binaries(signingKey: string, log: Log): string {
  const rev = run(["git", "rev-parse", "--short=12", "HEAD"], { cwd: REPO }).stdout.trim() || "unknown";
  const dist = join(DATA, "dist", rev);
  // The apps the deploy ships, and the monitoring host's NATS exporter (shipped by monitoring.ts).
  const apps = [...DEPLOY_ORDER, ROLLOUT, "nats-exporter"];
  const names = apps.map((a) => join(dist, `${a}-${VERSION}-linux-x64.sha256.sig`));
  if (process.env.REHEARSAL_REBUILD === "1" || !names.every(existsSync)) {
    mkdirSync(dist, { recursive: true });
    npmRun(
      [
        "build",
        "--version",
        VERSION,
        "--arch",
        "x64",
        "--apps",
        apps.join(","),
        "--out",
        dist,
        "--signing-key",
        signingKey,
      ],
      log,
    );
  } else log(`binaries of ${rev} (${VERSION}) already in ${dist}`);
  return dist;
}

/** Image, secrets, the bridge, the host's services, every host's user-data. */
async function prepare(state: State, regions: string[], log: Log) {
  const t = Date.now();
  const image = await ensureImage(REPO, log);
  state.image = { key: image.key, root: image.root };
  state.timings.imageSeconds = image.cached ? secondsSince(t) : image.builtSeconds;
  state.timings.imageCached = image.cached ? 1 : 0;
  log(`image ${image.key}: ${image.cached ? "cached" : `built in ${image.builtSeconds} s`} (${image.root})`);
  const s = ensureSecrets();
  const hosts = fleetOf(regions);
  const topos = regions.map((r) => topologyOf(hosts, r, regions));
  const nats = await natsArtifact(log);
  createBridge(log);
  const services = await startHostServices(s.passwords.provider_key!, log);
  const alerts = await startAlertReceiver(log);
  state.services = {
    emulatorPid: services.emulatorPid,
    artifactsPid: services.artifactsPid,
    emulatorUrl: services.emulatorUrl,
    alertsPid: alerts.pid,
    alertsUrl: alerts.url,
    alertsLog: alerts.logFile,
  };
  writeState(state);
  const lbs = Object.fromEntries(
    topos.map((t) => [
      t.lb.name,
      {
        haproxyConfig: templatefile(join(REPO, "infra", "rehearsal", "haproxy.cfg.tftpl"), {
          listen_ip: t.lb.ip,
          admin_port: String(LB_ADMIN_PORT),
          // The region's gateways, then the other regions' as backups (used when none of its own passes).
          servers: [
            ...t.apps.map((a) => `  server ${a.name} ${a.ip}:8080`),
            ...hosts
              .filter((a) => a.role === "app" && a.region !== t.region)
              .map((a) => `  server ${a.name} ${a.ip}:8080 backup`),
          ].join("\n"),
        }),
        certificate: lbCertificate(s, t.lb),
      },
    ]),
  );
  const userData = renderUserData(REPO, {
    hosts,
    regions,
    leafHubRegion: regions[0]!,
    privateCidr: SUBNET,
    natsServerVersion: nats.version,
    natsServerSha256: nats.sha256,
    natsServerUrl: nats.url,
    adminSshKeys: [s.sshPub],
    deploySshKeys: [s.sshPub],
    releaseSigningKeys: [s.signingPub],
    lbs,
  });
  mkdirSync(join(DATA, "user-data"), { recursive: true });
  for (const [name, text] of Object.entries(userData))
    writeFileSync(join(DATA, "user-data", `${name}.yaml`), text, { mode: 0o600 });
  return { image, s, hosts, topos, userData };
}

/** Boots every host at once; each is up when systemd runs and cloud-init is done. */
async function bootFleet(
  state: State,
  hosts: HostSpec[],
  image: { root: string; roleUnits: Record<string, string[]> },
  userData: Record<string, string>,
  log: Log,
) {
  const { root: imageRoot, roleUnits } = image;
  resetKnownHosts();
  const t = Date.now();
  const started = await Promise.all(
    hosts.map(async (h) => {
      const key = hostKeyPair(join(DATA, "secrets"), h.name);
      pinHostKey(h, key.public);
      // postgresql is a metapackage: its units belong to postgresql-common, enabled in the image.
      const units: Record<string, string[]> = { postgresql: ["postgresql.service"], ...roleUnits };
      const listed = packagesOf(userData[h.name]!);
      const enableUnits = listed.flatMap((p) => units[p] ?? []);
      const disableUnits = Object.entries(units).flatMap(([p, u]) => (listed.includes(p) ? [] : u));
      const m = await startMachine(
        h,
        imageRoot,
        { userData: userData[h.name]!, hostKey: key, enableUnits, disableUnits },
        log,
      );
      const hs: HostState = {
        ...h,
        machine: m.machine,
        nspawnPid: m.nspawnPid,
        leaderPid: m.leaderPid,
        hostKey: key.public.trim(),
      };
      state.hosts.push(hs);
      writeState(state);
      return { m, hs };
    }),
  );
  await Promise.all(
    started.map(async ({ m, hs }) => {
      const b = await waitBooted(m, log);
      hs.bootMs = b.cloudInitMs;
      log(`${hs.name}: systemd ${b.state} after ${b.systemdMs} ms, cloud-init done after ${b.cloudInitMs} ms`);
    }),
  );
  state.timings.bootAllSeconds = secondsSince(t);
  writeState(state);
}

/** The operator's part (docs/deploy.md, "Secrets"), as ops over SSH, region by region; then each region's schema. */
async function operate(state: State, topos: Topology[], s: Secrets, log: Log): Promise<SecretSource> {
  const t = Date.now();
  const src = secretSource(REPO, s, topos[0]!.regions, log);
  state.secrets = src.mode;
  state.secretsStore = src.store;
  const witness = topos[0]!.witness;
  await Promise.all([
    ...topos.flatMap((topo) => topo.nats.map((h) => setUpNats(h, topo, s, src, log))),
    ...(witness ? [setUpNats(witness, topos[0]!, s, src, log)] : []),
    ...topos.map((topo) => setUpPostgres(topo.postgres, s, src, log)),
  ]);
  for (const topo of topos) {
    for (const a of topo.apps) setUpApp(REPO, a, topo, s, src, log);
    const migrated = migrateFromClone(REPO, topo.apps[0]!, topo, s, src);
    log(`${topo.region}: migrate (from the clone over the private network): ${migrated.split("\n").slice(-1)[0]}`);
  }
  state.timings.operatorSeconds = secondsSince(t);
  return src;
}

/** The release: built and signed once per commit, deployed with the project's command, unchanged. */
function release(state: State, topos: Topology[], s: Secrets, src: SecretSource, log: Log): string {
  let t = Date.now();
  const dist = binaries(s.signingKey, log);
  state.timings.buildSeconds = secondsSince(t);
  const inventory = writeInventory(state.hosts);
  state.inventory = inventory;
  t = Date.now();
  const secrets = src.store ? ["--secrets", src.store] : [];
  for (const app of DEPLOY_ORDER)
    npmRun(["deploy", ...[app, VERSION, "--hosts", inventory, "--dist", dist, "--ssh-key", s.sshKey], ...secrets], log);
  // The rollout service runs on the home region's first app host alone (its rollout.env is there: operator.ts).
  const home = topos[0]!.apps[0]!;
  npmRun(
    [
      "deploy",
      ...[ROLLOUT, VERSION, "--hosts", rolloutInventory(inventory, home.name), "--dist", dist],
      ...["--ssh-key", s.sshKey, ...secrets],
    ],
    log,
  );
  state.timings.deploySeconds = secondsSince(t);
  for (const topo of topos) {
    const again = migrate(topo.apps[0]!, s, src).trim().split("\n").slice(-1)[0];
    log(`recovery migrate on ${topo.apps[0]!.name} (systemd-run, the deployed binary): ${again}`);
  }
  return dist;
}

/** Each region's load balancer puts a gateway in rotation (2 passing checks, 5 s apart), then one task through each. */
async function throughLb(state: State, topos: Topology[], s: Secrets, src: SecretSource, log: Log) {
  const clients = topos.map((t): LbClient => ({ url: `https://${t.lb.ip}`, ca: s.caPem, apiKey: src.apiKey }));
  state.lbUrl = clients[0]!.url;
  state.lbUrls = Object.fromEntries(topos.map((t, i) => [t.region, clients[i]!.url]));
  state.apiKey = src.apiKey;
  state.caFile = caFile(s);
  const t = Date.now();
  for (const client of clients)
    await waitFor(
      `${client.url}/readyz (a gateway in rotation)`,
      60_000,
      async () => ((await readyz(client)) === 200 ? true : undefined),
      500,
    );
  state.timings.lbReadySeconds = secondsSince(t);
  const shared = await sharedNameClient(state, topos, s, src, log);
  const firsts = await Promise.all([...clients, shared].map((c) => roundTrip(c, `up-${Date.now()}-${c.url.slice(8)}`)));
  const bad = firsts.find((f) => f.status !== "completed");
  if (bad) throw new Error(`a first task through an LB ended ${bad.status}`);
  state.timings.firstTaskMs = firsts[0]!.ms;
  return { client: clients[0]!, first: firsts[0]! };
}

/** The failover name server started on the regions' LBs; a client of the shared name it answers. */
async function sharedNameClient(
  state: State,
  topos: Topology[],
  s: Secrets,
  src: SecretSource,
  log: Log,
): Promise<LbClient> {
  const dns = await startNameServer(
    topos.map((t) => ({ region: t.region, ip: t.lb.ip })),
    caFile(s),
    log,
  );
  Object.assign(state.services, { dnsPid: dns.pid, dnsServer: dns.server, dnsStatusUrl: dns.statusUrl });
  state.sharedUrl = `https://${SHARED_NAME}`;
  writeState(state);
  return { url: state.sharedUrl, ca: s.caPem, apiKey: src.apiKey, dns: nameLookup(dns.server, SHARED_NAME) };
}

export async function up(log: Log, o: { regions?: string[] } = {}): Promise<UpResult> {
  const regions = o.regions ?? ["fsn1"];
  const t0 = Date.now();
  ensureHostTools(log);
  await acquireFleet(log);
  if (readState()) {
    log("a previous rehearsal is still recorded: taking it down first");
    await down(log);
    await acquireFleet(log);
  }
  const state: State = {
    startedAt: new Date().toISOString(),
    phase: "starting",
    regions,
    hosts: [],
    services: {},
    timings: {},
  };
  writeState(state);
  try {
    const { image, s, hosts, topos, userData } = await prepare(state, regions, log);
    await bootFleet(state, hosts, image, userData, log);
    const src = await operate(state, topos, s, log);
    const dist = release(state, topos, s, src, log);
    const mon = hosts.find((h) => h.role === "monitoring");
    if (mon) {
      const m = await setUpMonitoring(mon, hosts, s.sshKey, join(dist, `nats-exporter-${VERSION}-linux-x64`), log);
      state.timings.monitoringSeconds = m.seconds;
      state.timings.monitoringTargets = m.targets;
    }
    const { client, first } = await throughLb(state, topos, s, src, log);
    state.timings.upSeconds = secondsSince(t0);
    state.phase = "up";
    writeState(state);
    return { state, client, firstTask: first };
  } catch (err) {
    state.phase = "failed";
    writeState(state);
    throw err;
  }
}

export async function down(log: Log): Promise<{ seconds: number }> {
  const t0 = Date.now();
  const state = readState();
  const other = otherFleet();
  if (other) {
    // The hosts' names and the bridge are the machine's: they are that clone's fleet, not ours.
    log(`another clone's rehearsal is up (${other}): leaving its hosts and bridge alone`);
    clearState();
    return { seconds: secondsSince(t0) };
  }
  const hosts: Array<HostSpec & { nspawnPid?: number }> = state?.hosts.length
    ? state.hosts
    : // Nothing recorded: whatever a two-region fleet may have left.
      fleetOf(["fsn1", "hel1"]);
  await Promise.all(
    hosts.map(async (h) => {
      const r = await stopMachine(h, h.nspawnPid, log);
      log(`${h.name}: stopped${r.clean ? "" : " (killed)"}`);
    }),
  );
  stopPid(state?.services.emulatorPid, "emulator");
  stopPid(state?.services.artifactsPid, "serve-artifacts");
  stopPid(state?.services.alertsPid, "alert-receiver");
  stopPid(state?.services.dnsPid, "dns-server");
  removeBridge(log);
  clearState();
  releaseFleet();
  return { seconds: secondsSince(t0) };
}

export interface HostStatus {
  name: string;
  role: string;
  ip: string;
  machine: string;
  running: boolean;
  systemd?: string;
}

export function status(): { state?: State; hosts: HostStatus[]; bridge: boolean; ports: string[] } {
  const state = readState();
  const hosts = (state?.hosts ?? []).map((h) => {
    const running = existsSync(`/proc/${h.nspawnPid}`) && existsSync(`/proc/${h.leaderPid}`);
    return {
      name: h.name,
      role: h.role,
      ip: h.ip,
      machine: machineName(h),
      running,
      ...(running ? { systemd: inMachine(h, "systemctl is-system-running").stdout.trim() } : {}),
    };
  });
  return { state, hosts, bridge: bridgeExists(), ports: bridgeExists() ? bridgePorts() : [] };
}

/** The fleet as a table: name, address, role. */
export function fleetTable(
  hosts: Array<{ name: string; ip: string; role: string; running?: boolean; systemd?: string }>,
): string {
  return hosts
    .map(
      (h) =>
        `  ${h.name.padEnd(14)} ${h.ip.padEnd(12)} ${h.role.padEnd(9)}${h.systemd ? ` ${h.systemd}` : h.running === false ? " stopped" : ""}`,
    )
    .join("\n");
}
