// The one way the project starts its own system: `startStack` for dev (`npm run dev`, one region or
// two), the end-to-end tests, the drills and the benchmarks. One region, or two joined as in
// production (each its own nats-server and JetStream domain, hel1's leafnode to fsn1, a witness
// nats-server holding the region leases); the provider emulator; each region's gateway, solvers and
// recovery service as real processes started by a launcher (log files for tests, prefixed console
// output for dev, a network namespace for the netns drills). Servers come from a `ServerSource`
// (servers.ts), every app's settings from app-env.ts.
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEmulator, type Emulator, type EmulatorOptions } from "@pipeline/emulator";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { provisionRegionsAt } from "@pipeline/shared/provision";
import { waitForPort } from "../free-port.ts";
import type { NatsServerHandle } from "../nats-server.ts";
import { PROVIDER_KEY, type Proc, spawnApp } from "../testing/processes.ts";
import {
  gatewayEnv,
  type LeaseTiming,
  type RegionWiring,
  recoveryEnv,
  type StackProfile,
  solverEnv,
} from "./app-env.ts";
import { waitForLeases, waitForMirrors } from "./ready.ts";
import { type Relay, startRelay } from "./relay.ts";
import { type ServerSource, type StackDatabase, testServers } from "./servers.ts";

/** Starts one app process: `bun <script>` with `env` (log files, console lines, a namespace...). */
export type Launcher = (name: string, script: string, env: Record<string, string>) => Proc;

export interface StackOptions {
  /** One region, or two (the second's leafnode connects to the first's). Default `["e2e"]`. */
  regions?: string[];
  profile?: StackProfile;
  servers?: ServerSource;
  /** Default: each app's output in a log file under `logDir`. */
  launcher?: Launcher;
  logDir?: string;
  /** The provider: a URL of one already running, or an in-process emulator with these options. */
  provider?: { url: string; key: string };
  emulator?: Partial<EmulatorOptions>;
  /** Per region: gateways (0 or 1), solvers, the recovery service (default: with two regions). */
  apps?: { gateway?: boolean; solvers?: number; recovery?: boolean };
  /** Client keys of the gateways (API_KEYS). */
  apiKeys?: string;
  /** Settings over the stack's own, per app. */
  env?: { gateway?: Record<string, string>; solver?: Record<string, string>; recovery?: Record<string, string> };
  /** The apps' LOG_LEVEL (default: the profile's, info; bench warn). */
  logLevel?: string;
  /** Two regions: the leafnode link and each region's link to the witness go through relays a test can cut. */
  relayed?: boolean;
  lease?: LeaseTiming;
  /** Recovery's DATA_DIR per region (default: a temp folder). */
  dataDir?: (region: string) => string;
  /** Solver WORKER_IDs (default `solver-<region>` for the first, then `-2`...; one region: `solver-<n>`). */
  workerId?: (region: string, n: number) => string;
}

export interface RegionStack {
  name: string;
  nats: NatsServerHandle;
  database: StackDatabase;
  /** A small pool of the admin's on the region's database (the test's own checks). */
  db: Database;
  wiring: RegionWiring;
  gatewayUrl: string;
  gatewayPort: number;
  gatewayMetricsUrl: string | undefined;
  /** Every process started in this region, in start order. */
  procs: Proc[];
  gateway: Proc | undefined;
  solvers: Proc[];
  recovery: Proc | undefined;
  spawnSolver(extra?: Record<string, string>): Proc;
  /** Starts a new gateway process on the same port (after a kill). */
  restartGateway(): Promise<Proc>;
  /** Two regions, relayed: this region's link to the witness. */
  witnessLink: Relay | undefined;
}

export interface StackHandle {
  regions: RegionStack[];
  provider: { url: string; key: string };
  emu: Emulator | undefined;
  witness: NatsServerHandle | undefined;
  /** Two regions, relayed: the leafnode link. */
  regionLink: Relay | undefined;
  logDir: string;
  launcher: Launcher;
  /** Every log line the apps wrote so far. */
  logs(): string;
  stop(): Promise<void>;
}

interface Topology {
  servers: Map<string, NatsServerHandle>;
  witness: NatsServerHandle | undefined;
  regionLink: Relay | undefined;
  witnessLinks: Map<string, Relay>;
}

/** Two regions' nats-servers, joined as in production (`startRegionPair`). */
export interface RegionPair {
  /** The first region's: the second's leafnode connects to it. */
  first: NatsServerHandle;
  second: NatsServerHandle;
  /** `relayed`: the leafnode link, a relay a test can cut. */
  link: Relay | undefined;
}

/**
 * Two regions' nats-servers joined as in production: each its own JetStream domain, the second's
 * leafnode connecting to the first's (through a relay with `relayed`). The caller stops them; a
 * failed start stops what it had started.
 */
export async function startRegionPair(
  servers: ServerSource,
  [ra, rb]: readonly [string, string],
  o: { relayed?: boolean } = {},
): Promise<RegionPair> {
  const stops: Stops = [];
  try {
    const leafPort = (await servers.port("leaf"))!;
    const link = o.relayed ? await startRelay({ host: "127.0.0.1", port: leafPort }) : undefined;
    if (link) stops.push(() => link.stop());
    const leafAddress = link?.port ?? leafPort;
    const first = await servers.nats({
      name: ra,
      regions: [ra],
      domain: ra,
      // The second region must keep reaching the first through the relay, also after a reconnect.
      leafnodes: { listenPort: leafPort, ...(link ? { advertise: `127.0.0.1:${leafAddress}` } : {}) },
    });
    stops.push(() => first.stop());
    const second = await servers.nats({
      name: rb,
      regions: [rb],
      domain: rb,
      leafnodes: { remotes: [{ host: "127.0.0.1", port: leafAddress, credentials: first.leafCredentials }] },
    });
    return { first, second, link };
  } catch (err) {
    for (const s of stops.reverse()) await s().catch(() => {});
    throw err;
  }
}

/** The nats-servers: one per region, plus the witness and the leafnode link with two regions. */
async function startTopology(
  o: StackOptions,
  regions: string[],
  servers: ServerSource,
  stops: Stops,
): Promise<Topology> {
  const t: Topology = { servers: new Map(), witness: undefined, regionLink: undefined, witnessLinks: new Map() };
  if (regions.length === 1) {
    const h = await servers.nats({ name: regions[0]!, regions });
    stops.push(() => h.stop());
    t.servers.set(regions[0]!, h);
    return t;
  }
  const [ra, rb] = regions as [string, string];
  const witness = await servers.nats({ name: "witness", regions: [] });
  stops.push(() => witness.stop());
  t.witness = witness;
  const { first: a, second: b, link: regionLink } = await startRegionPair(servers, [ra, rb], { relayed: o.relayed });
  t.regionLink = regionLink;
  if (regionLink) stops.push(() => regionLink.stop());
  stops.push(() => a.stop());
  stops.push(() => b.stop());
  t.servers.set(ra, a).set(rb, b);
  if (o.relayed)
    for (const r of regions) {
      const link = await startRelay({ host: "127.0.0.1", port: witness.port });
      stops.push(() => link.stop());
      t.witnessLinks.set(r, link);
    }
  return t;
}

type Stops = Array<() => Promise<void>>;

/** SIGTERM (the apps drain), SIGKILL for what has not exited after `graceMs`. */
async function stopProcs(procs: Proc[], graceMs = 15_000): Promise<void> {
  await Promise.all(
    procs.map(async (p) => {
      if (p.exitCode() !== undefined) return;
      const exited = p.kill("SIGTERM");
      if (await Promise.race([exited.then(() => false), Bun.sleep(graceMs).then(() => true)])) await p.kill("SIGKILL");
    }),
  );
}

interface RegionContext {
  o: StackOptions;
  regions: string[];
  servers: ServerSource;
  launcher: Launcher;
  provider: { url: string; key: string };
  topology: Topology;
  stops: Stops;
}

const workerIdOf = (o: StackOptions, regions: string[], region: string, n: number) =>
  o.workerId?.(region, n) ??
  (regions.length === 1 ? `solver-${n}` : n === 1 ? `solver-${region}` : `solver-${region}-${n}`);

/** What the apps of a region connect to. */
function wiringOf(c: RegionContext, name: string, database: StackDatabase): RegionWiring {
  const { o, topology } = c;
  const witnessAuth = topology.witness?.auth("recovery");
  const witnessLink = topology.witnessLinks.get(name);
  return {
    region: name,
    regions: c.regions,
    nats: topology.servers.get(name)!,
    database,
    provider: c.provider,
    profile: o.profile ?? "test",
    ...(o.logLevel ? { logLevel: o.logLevel } : {}),
    ...(topology.witness && witnessAuth
      ? {
          witness: {
            url: witnessLink ? `nats://127.0.0.1:${witnessLink.port}` : topology.witness.url,
            user: witnessAuth.user!,
            password: witnessAuth.pass!,
          },
        }
      : {}),
  };
}

/** The region's app starters: each process joins `procs` (the region's live list). */
async function appStarters(c: RegionContext, wiring: RegionWiring, procs: Proc[]) {
  const { o } = c;
  const name = wiring.region;
  const label = (app: string) => (c.regions.length === 1 ? app : `${app}-${name}`);
  const launch = (n: string, script: string, env: Record<string, string>) => {
    const p = c.launcher(n, script, env);
    procs.push(p);
    return p;
  };
  const withGateway = o.apps?.gateway !== false;
  const gatewayPort = withGateway ? ((await c.servers.port(`gateway:${name}`)) ?? 0) : 0;
  const metricsPort = withGateway ? await c.servers.port(`gateway-metrics:${name}`) : undefined;
  const gwEnv = {
    ...gatewayEnv(wiring, {
      port: gatewayPort,
      apiKeys: o.apiKeys ?? "e2e-client-key-0001",
      ...(metricsPort !== undefined ? { metricsPort } : {}),
    }),
    ...o.env?.gateway,
  };
  const solvers: Proc[] = [];
  const solverMetrics = await c.servers.port(`solver-metrics:${name}`);
  const spawnSolver = (extra: Record<string, string> = {}) => {
    const n = solvers.length + 1;
    const workerId = workerIdOf(o, c.regions, name, n);
    const metrics = solverMetrics ? { metricsPort: solverMetrics + n - 1 } : {};
    const env = { ...solverEnv(wiring, { workerId, ...metrics }), ...o.env?.solver, ...extra };
    const procName = c.regions.length === 1 ? workerId : n === 1 ? label("solver") : `solver-${name}-${n}`;
    const p = launch(procName, "apps/solver/src/main.ts", env);
    solvers.push(p);
    return p;
  };
  const startRecovery = () => {
    const dataDir = o.dataDir?.(name) ?? mkdtempSync(join(tmpdir(), `stack-${name}-`));
    const env = { ...recoveryEnv(wiring, { dataDir, ...(o.lease ? { lease: o.lease } : {}) }), ...o.env?.recovery };
    return launch(label("recovery"), "apps/recovery/src/main.ts", env);
  };
  return {
    withGateway,
    gatewayPort,
    metricsPort,
    launchGateway: () => launch(label("gateway"), "apps/gateway/src/main.ts", gwEnv),
    solvers,
    spawnSolver,
    startRecovery,
  };
}

/** One region's database, topology and apps. */
async function startRegion(c: RegionContext, name: string): Promise<RegionStack> {
  const { o } = c;
  const database = await c.servers.database(name);
  const wiring = wiringOf(c, name, database);
  const nats = c.topology.servers.get(name)!;
  // The region's topology first, as its recovery service makes it at start: the apps wait for it.
  await provisionRegionsAt(nats.url, nats.auth("admin"), [name]);
  const procs: Proc[] = [];
  const apps = await appStarters(c, wiring, procs);
  const region: RegionStack = {
    name,
    nats,
    database,
    db: openDatabase(database.url, { max: 2, appName: "stack" }),
    wiring,
    gatewayUrl: `http://127.0.0.1:${apps.gatewayPort}`,
    gatewayPort: apps.gatewayPort,
    gatewayMetricsUrl: apps.metricsPort ? `http://127.0.0.1:${apps.metricsPort}` : undefined,
    procs,
    gateway: undefined,
    solvers: apps.solvers,
    recovery: undefined,
    spawnSolver: apps.spawnSolver,
    async restartGateway() {
      region.gateway = apps.launchGateway();
      await waitForPort(apps.gatewayPort, 20_000);
      return region.gateway;
    },
    witnessLink: c.topology.witnessLinks.get(name),
  };
  c.stops.push(() => region.db.close());
  if (apps.withGateway) region.gateway = apps.launchGateway();
  for (let i = 0; i < (o.apps?.solvers ?? 1); i++) apps.spawnSolver();
  if (o.apps?.recovery ?? c.regions.length > 1) region.recovery = apps.startRecovery();
  return region;
}

export async function startStack(o: StackOptions = {}): Promise<StackHandle> {
  const regions = o.regions ?? ["e2e"];
  if (regions.length < 1 || regions.length > 2 || new Set(regions).size !== regions.length)
    throw new Error(`a stack has one region or two (got ${regions.join(",")})`);
  const logDir = o.logDir ?? mkdtempSync(join(tmpdir(), "pipeline-stack-"));
  const launcher: Launcher = o.launcher ?? ((name, script, env) => spawnApp(name, script, env, logDir));
  const servers = o.servers ?? testServers();
  // Stopped in reverse: the apps first (they drain), then the emulator, the servers.
  const stops: Stops = [() => servers.stop()];
  const stop = async () => {
    for (const s of stops.reverse()) await s().catch(() => {});
  };
  try {
    let emu: Emulator | undefined;
    let provider = o.provider;
    if (!provider) {
      emu = createEmulator({ port: 0, keys: { [PROVIDER_KEY]: { threads: 1000 } }, latencyMs: 0, ...o.emulator });
      await emu.start();
      stops.push(() => emu!.stop());
      provider = { url: emu.url, key: PROVIDER_KEY };
    }
    const topology = await startTopology(o, regions, servers, stops);
    const c: RegionContext = { o, regions, servers, launcher, provider, topology, stops };
    const started: RegionStack[] = [];
    for (const r of regions) {
      const region = await startRegion(c, r);
      started.push(region);
      // Procs added later (spawnSolver, restartGateway) are stopped too: the region's list is live.
      stops.push(() => stopProcs(region.procs));
    }
    for (const r of started) if (r.gateway) await waitForPort(r.gatewayPort, 60_000);
    if (regions.length > 1 && (o.apps?.recovery ?? true)) {
      await waitForLeases(started);
      await waitForMirrors(started);
    }
    return {
      regions: started,
      provider,
      emu,
      witness: topology.witness,
      regionLink: topology.regionLink,
      logDir,
      launcher,
      logs: () =>
        [...new Set(started.flatMap((r) => r.procs.map((p) => p.logFile)))]
          .map((f) => readFileSync(f, "utf8"))
          .join("\n"),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
