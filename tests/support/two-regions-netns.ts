// Two regions on one machine, each in its own network namespace (root only; CI runs as root):
// a region's nats-server, Postgres, gateway, solver and recovery service run in `rg<pid>n<k>-<region>`,
// the witness in `rg<pid>n<k>-witness`. What crosses regions goes over a bridge (the "WAN"): every
// namespace has a `wan` veth port on it, and this process, on the bridge too, runs a delaying TCP
// relay per inter-region link (this kernel has no netem): hel1's leafnode link to fsn1 and each
// region's connection to the witness. A partition is `ip link set <region's WAN port> down`: the
// relays' connections into that region stall as on a real cut link (nothing is closed for them).
// Each region also has an access link (a /30 veth pair to this namespace) carrying what is not
// inter-region: its clients (the test's HTTP calls), the provider (the emulator, in this process)
// and an operator's view of its NATS and Postgres. The access links are never cut.
//
//   this process (root namespace): emulator, relays on the bridge, the test's clients
//     │ access link fsn1 (/30)      │ bridge rg<pid>n<k>br (/26)       │ access link hel1 (/30)
//   ┌─┴────────────┐  wan   ┌───────┴────────┐  wan   ┌──────────────┐ │
//   │ ns fsn1      ├───────►│ relays (delay) │◄───────┤ ns hel1      ├─┘
//   │ nats pg apps │        └───────┬────────┘        │ nats pg apps │
//   └──────────────┘                │ wan             └──────────────┘
//                            ┌──────┴───────┐
//                            │ ns witness   │
//                            └──────────────┘
//
// Names and addresses derive from this process's pid and a count of its stacks; `stop()` removes
// every namespace, link and process, as does a watchdog if this process dies without stopping.
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import {
  type NatsServerHandle,
  natsEnv,
  type PostgresHandle,
  startNatsServer,
  startPostgres,
  waitForPort,
} from "@pipeline/devstack";
import {
  gatewayEnv,
  type RegionWiring,
  type Relay,
  recoveryEnv,
  solverEnv,
  startRelay,
} from "@pipeline/devstack/stack";
import { createTestDatabase, eventually } from "@pipeline/devstack/testing";
import { createEmulator, type Emulator } from "@pipeline/emulator";
import { openDatabase } from "@pipeline/shared/db";
import { connectNats } from "@pipeline/shared/nats";
import { provisionRegionsAt } from "@pipeline/shared/provision";
import { buckets } from "@pipeline/shared/subjects";
import { type Proc, spawnApp } from "../harness.ts";
import { addNamespace, addVeth, guardTeardown, sh, shAsync, usedAddresses } from "./netns.ts";
import { spawnRecoveryCli } from "./recovery-cli.ts";
import { type LogFile, lastErrors, logsIn, watchEventLoop } from "./stack-diagnosis.ts";
import {
  API_KEY,
  PROVIDER_KEY,
  REGIONS,
  type Region,
  type TwoRegionOptions,
  type TwoRegions,
  waitForLeases,
  waitForMirrors,
} from "./two-regions.ts";

export interface NetnsTwoRegionOptions extends TwoRegionOptions {
  /** One-way delay of each inter-region relay, per chunk (default 30 ms: fsn1-hel1 is ~25 ms apart). */
  latencyMs?: number;
  /**
   * 3: the witness is a 3-node JetStream cluster as in production, one node per location (in
   * fsn1's and hel1's namespaces and the witness's, "nbg1"), routes through the relays, the leases
   * bucket with 3 replicas. Each region's keeper connects to its own location's node and nbg1's.
   * Default 1: one witness server in its own namespace.
   */
  witnessNodes?: 1 | 3;
  /**
   * A port of this process (listening on 0.0.0.0) taking the operators' webhook: each region's
   * recovery service gets NOTIFY_WEBHOOK_URL `http://<its host access address>:<port>/hook/<region>`.
   */
  notifyWebhookPort?: number;
}

export interface NetnsRegion extends Region {
  /** The region's network namespace (`rg<pid>n<k>-<region>`). */
  ns: string;
  /** Its address on the bridge (inter-region) and on its access link (clients, provider, operator). */
  wanIp: string;
  accessIp: string;
  /** The bridge port (in the root namespace) that `isolate` sets down. */
  wanPort: string;
}

export interface NetnsTwoRegions extends Omit<TwoRegions, "regions" | "isolate" | "heal"> {
  regions: [NetnsRegion, NetnsRegion];
  witnessNs: string;
  /** With `witnessNodes: 3`, the nodes named `witness-nbg1` (the one `witness` is), `witness-fsn1`, `witness-hel1`, in that order; else `[witness]`. */
  witnessNodes: NatsServerHandle[];
  latencyMs: number;
  /** Cuts a region off from the other region and the witness: `ip link set <its WAN port> down`. */
  isolate(name: string): Promise<void>;
  /** Sets every WAN port up again. */
  heal(): Promise<void>;
  /**
   * A region lost for good: kill -9 every process in its namespace (nats-server, Postgres, apps)
   * and its WAN port down. Its access link stays: its clients' connections are refused at once.
   */
  killRegion(name: string): Promise<void>;
  /** Starts one more process of a region's app inside its namespace (e.g. a second solver). */
  spawnIn(r: NetnsRegion, name: string, script: string, env: Record<string, string>): Proc;
  /** This process's event-loop lag since the stack started (the relays and the emulator run on it). */
  eventLoop(): string;
  /** For a failed drill's message: the event-loop lag, the last errors in the stack's logs. */
  diagnose(): string;
}

let stacks = 0;
/**
 * The namespace plan of one stack: names from the pid and a per-process count (interface names
 * stay within 15 characters), a free /24 under 10.220.0.0-10.254.255.0.
 */
function plan() {
  const tag = `rg${process.pid}n${(stacks++ % 36).toString(36)}`;
  const used = usedAddresses();
  let idx = process.pid % 8960;
  let base = "";
  for (let i = 0; i < 8960; i++, idx = (idx + 1) % 8960) {
    base = `10.${220 + (idx >> 8)}.${idx & 255}`;
    if (!used.includes(` ${base}.`)) break;
  }
  return {
    tag,
    bridge: `${tag}br`,
    bridgeIp: `${base}.1`,
    witness: { ns: `${tag}-witness`, wanPort: `${tag}w2`, wanIp: `${base}.4` },
    regions: REGIONS.map((name, i) => ({
      name,
      ns: `${tag}-${name}`,
      wanPort: `${tag}w${i}`,
      wanIp: `${base}.${2 + i}`,
      accessPort: `${tag}a${i}`,
      hostAccessIp: `${base}.${64 + 4 * i + 1}`,
      accessIp: `${base}.${64 + 4 * i + 2}`,
    })),
  };
}

/** What `plan()` names: the namespaces and the links of this namespace (removed at stop). */
function planNames(p: ReturnType<typeof plan>): { namespaces: string[]; links: string[] } {
  return {
    namespaces: [...p.regions.map((r) => r.ns), p.witness.ns],
    links: [...p.regions.flatMap((r) => [r.wanPort, r.accessPort]), p.witness.wanPort, p.bridge],
  };
}

/** Runs `bun <script>` inside a namespace, as `spawnApp` does outside one. */
const spawnInNs = (ns: string, name: string, script: string, env: Record<string, string>, logDir: string): Proc =>
  spawnApp(name, script, env, logDir, ["ip", "netns", "exec", ns]);

type Plan = ReturnType<typeof plan>;
type Site = Plan["regions"][number];

/** What the steps of one stack share: its plan, options, cleanups, temp folders and relays on the WAN. */
interface NetnsContext {
  p: Plan;
  o: NetnsTwoRegionOptions;
  logDir: string;
  cleanups: Array<() => Promise<void>>;
  tmp(prefix: string): string;
  relay(to: { host: string; port: number }): Promise<Relay>;
}

/** The WAN bridge, the namespaces, their WAN ports and access links (blocking: before any relay runs). */
function buildNetwork(p: Plan): void {
  // The WAN: a bridge this process is on (its relays listen there).
  sh(["ip", "link", "add", p.bridge, "type", "bridge"]);
  sh(["ip", "addr", "add", `${p.bridgeIp}/26`, "dev", p.bridge]);
  sh(["ip", "link", "set", p.bridge, "up"]);
  const joinWan = (ns: string, port: string, ip: string) =>
    addVeth({ hostIf: port, peer: `${port}p`, ns, nsName: "wan", nsCidr: `${ip}/26`, master: p.bridge });
  for (const ns of [p.witness.ns, ...p.regions.map((r) => r.ns)]) addNamespace(ns);
  joinWan(p.witness.ns, p.witness.wanPort, p.witness.wanIp);
  for (const r of p.regions) {
    joinWan(r.ns, r.wanPort, r.wanIp);
    addVeth({
      hostIf: r.accessPort,
      peer: `${r.accessPort}p`,
      ns: r.ns,
      nsName: "access",
      nsCidr: `${r.accessIp}/30`,
      hostCidr: `${r.hostAccessIp}/30`,
    });
  }
}

/** The witness: one server in its namespace, or a 3-node cluster; the leases bucket made on it. */
async function startWitness(c: NetnsContext): Promise<NatsServerHandle[]> {
  const { p, o, tmp, relay, cleanups } = c;
  // The witness: one server in its namespace, or a 3-node cluster across the three locations.
  const witnessNodes: NatsServerHandle[] = [];
  if ((o.witnessNodes ?? 1) === 3) {
    const sites = [
      { site: "nbg1", ns: p.witness.ns, wanIp: p.witness.wanIp },
      ...p.regions.map((r) => ({ site: r.name, ns: r.ns, wanIp: r.wanIp })),
    ];
    // Every route goes through a relay on the WAN (each node advertises its relay).
    const routeRelays = await Promise.all(sites.map((x) => relay({ host: x.wanIp, port: 6222 })));
    for (const [i, x] of sites.entries()) {
      const node = await startNatsServer({
        port: 4223,
        host: x.wanIp,
        netns: x.ns,
        storeDir: tmp(`nats-witness-${x.site}-`),
        name: `witness-${x.site}`,
        ...(witnessNodes[0] ? { credentialsFrom: witnessNodes[0].credentialsFile } : {}),
        cluster: {
          name: "witness",
          port: 6222,
          advertise: `${p.bridgeIp}:${routeRelays[i]!.port}`,
          routes: routeRelays.filter((_, j) => j !== i).map((r) => ({ host: p.bridgeIp, port: r.port })),
        },
      });
      cleanups.push(() => node.stop());
      witnessNodes.push(node);
    }
  } else {
    const node = await startNatsServer({
      port: 4222,
      host: p.witness.wanIp,
      netns: p.witness.ns,
      storeDir: tmp("nats-witness-"),
      name: "witness-1",
    });
    cleanups.push(() => node.stop());
    witnessNodes.push(node);
  }
  const witness = witnessNodes[0]!;
  // The leases bucket, made as an operator provisions the witness (with 3 nodes, once the cluster
  // has formed): the keepers' own create, with its 1 s timeout, then only finds it.
  {
    const wnc = await connectNats(witness.url, "two-regions-witness-setup", witness.auth("recovery"));
    try {
      await eventually(
        async () =>
          Boolean(
            await new Kvm(jetstream(wnc, { timeout: 5000 })).create(buckets.leases(), {
              history: 1,
              replicas: witnessNodes.length,
            }),
          ),
        60_000,
        500,
      );
    } finally {
      await wnc.close();
    }
  }
  return witnessNodes;
}

/** The regions' nats-servers: hel1's leafnode reaches fsn1 through a relay on the WAN. */
async function startRegionServers(c: NetnsContext) {
  const { p, tmp, relay, cleanups } = c;
  const [pa, pb] = p.regions as [(typeof p.regions)[number], (typeof p.regions)[number]];
  // hel1 connects its leafnode to fsn1 through a relay on the WAN.
  const regionLink = await relay({ host: pa.wanIp, port: 7422 });
  const a = await startNatsServer({
    port: 4222,
    host: pa.accessIp,
    netns: pa.ns,
    storeDir: tmp("nats-fsn1-"),
    name: "fsn1-1",
    regions: ["fsn1"],
    domain: "fsn1",
    leafnodes: { listenPort: 7422, listenHost: pa.wanIp, advertise: `${p.bridgeIp}:${regionLink.port}` },
  });
  cleanups.push(() => a.stop());
  const b = await startNatsServer({
    port: 4222,
    host: pb.accessIp,
    netns: pb.ns,
    storeDir: tmp("nats-hel1-"),
    name: "hel1-1",
    regions: ["hel1"],
    domain: "hel1",
    leafnodes: { remotes: [{ host: p.bridgeIp, port: regionLink.port, credentials: a.leafCredentials }] },
  });
  cleanups.push(() => b.stop());

  return { pa, pb, a, b, regionLink };
}

/** A region's gateway, solver and recovery service, in its namespace. */
function spawnRegionApps(c: NetnsContext, rp: Site, wiring: RegionWiring): Proc[] {
  const { o, tmp, logDir } = c;
  const lease = {
    ...(o.leaseTtlMs ? { ttlMs: o.leaseTtlMs } : {}),
    ...(o.leaseMarginMs ? { marginMs: o.leaseMarginMs } : {}),
    ...(o.leaseRenewMs ? { renewMs: o.leaseRenewMs } : {}),
    ...(o.adoptUncertainMs ? { adoptUncertainMs: o.adoptUncertainMs } : {}),
  };
  return [
    spawnInNs(
      rp.ns,
      `gateway-${rp.name}`,
      "apps/gateway/src/main.ts",
      gatewayEnv(wiring, { host: rp.accessIp, port: 8080, apiKeys: API_KEY }),
      logDir,
    ),
    spawnInNs(
      rp.ns,
      `solver-${rp.name}`,
      "apps/solver/src/main.ts",
      { ...solverEnv(wiring, { workerId: `solver-${rp.name}` }), ...o.solverEnv },
      logDir,
    ),
    spawnInNs(
      rp.ns,
      `recovery-${rp.name}`,
      "apps/recovery/src/main.ts",
      {
        ...recoveryEnv(wiring, { dataDir: tmp(`regions-${rp.name}-`), lease }),
        ...(o.notifyWebhookPort
          ? { NOTIFY_WEBHOOK_URL: `http://${rp.hostAccessIp}:${o.notifyWebhookPort}/hook/${rp.name}` }
          : {}),
        ...o.recoveryEnv,
      },
      logDir,
    ),
  ];
}

/** One region in its namespace: Postgres, the topology, gateway, solver and recovery. */
async function startRegion(
  c: NetnsContext,
  rp: Site,
  nats: NatsServerHandle,
  witnessNodes: NatsServerHandle[],
  emuPort: number,
): Promise<NetnsRegion> {
  const { p, o, tmp, relay, cleanups, logDir } = c;
  const witness = witnessNodes[0]!;
  const pgDir = tmp(`pg-${rp.name}-`);
  const pg: PostgresHandle = await startPostgres({
    dataDir: pgDir,
    port: 5432,
    host: rp.accessIp,
    netns: rp.ns,
    fast: true,
  });
  cleanups.push(() => pg.stop("immediate"));
  const tdb = await createTestDatabase(`reg_${rp.name}`, pg.adminUrl);
  // The keeper's link to the witness (3 nodes: to nbg1's node; its own location's node it reaches inside its namespace).
  const threeNodes = witnessNodes.length === 3;
  const witnessLink = await relay({ host: p.witness.wanIp, port: threeNodes ? 4223 : 4222 });
  const w = witness.auth("recovery");
  const wiring: RegionWiring = {
    region: rp.name,
    regions: [...REGIONS],
    nats,
    database: tdb,
    provider: { url: `http://${rp.hostAccessIp}:${emuPort}`, key: PROVIDER_KEY },
    profile: "test",
    logLevel: process.env.LOG_LEVEL ?? "info",
    witness: {
      url: threeNodes
        ? `nats://${rp.wanIp}:4223,nats://${p.bridgeIp}:${witnessLink.port}`
        : `nats://${p.bridgeIp}:${witnessLink.port}`,
      user: w.user!,
      password: w.pass!,
      replicas: witnessNodes.length,
    },
  };
  // The region's topology first, as its recovery service makes it at start: the apps wait for it.
  await provisionRegionsAt(nats.url, nats.auth("admin"), [rp.name]);
  const procs = spawnRegionApps(c, rp, wiring);
  const db = openDatabase(tdb.url, { max: 2 });
  cleanups.push(async () => {
    await Promise.all(procs.map((x) => x.kill("SIGTERM")));
    await db.close();
  });
  await waitForPort(8080, 20_000, rp.accessIp);
  return {
    name: rp.name,
    nats,
    tdb,
    db,
    gatewayUrl: `http://${rp.accessIp}:8080`,
    procs,
    witnessLink,
    ns: rp.ns,
    wanIp: rp.wanIp,
    accessIp: rp.accessIp,
    wanPort: rp.wanPort,
    wiring,
  };
}

/** The handle of a started stack: its parts, and the faults a drill injects. */
function netnsHandle(x: {
  p: Plan;
  emu: Emulator;
  witness: NatsServerHandle;
  witnessNodes: NatsServerHandle[];
  regions: [NetnsRegion, NetnsRegion];
  regionLink: Relay;
  logDir: string;
  latencyMs: number;
  loop: ReturnType<typeof watchEventLoop>;
  natsLogs: LogFile[];
  stopAll: () => Promise<void>;
}): NetnsTwoRegions {
  const { p, emu, witness, witnessNodes, regions, regionLink, logDir, latencyMs, loop, natsLogs, stopAll } = x;
  return {
    emu,
    witness,
    witnessNs: p.witness.ns,
    witnessNodes,
    regions,
    regionLink,
    logDir,
    latencyMs,
    async isolate(name) {
      await shAsync(["ip", "link", "set", regions.find((r) => r.name === name)!.wanPort, "down"]);
    },
    async heal() {
      for (const r of regions) await shAsync(["ip", "link", "set", r.wanPort, "up"]);
    },
    async killRegion(name) {
      const r = regions.find((x) => x.name === name)!;
      await shAsync(["sh", "-c", `kill -KILL $(ip netns pids ${r.ns}) 2>/dev/null; true`]);
      await shAsync(["ip", "link", "set", r.wanPort, "down"]);
      const pids = async () => {
        const p = Bun.spawn(["ip", "netns", "pids", r.ns], { stdout: "pipe" });
        return (await new Response(p.stdout).text()).trim();
      };
      await eventually(async () => (await pids()) === "", 5000, 100).catch(async () => {
        throw new Error(`processes left in ${r.ns} after kill -9: ${await pids()}`);
      });
    },
    spawnIn(r, name, script, env) {
      const proc = spawnInNs(r.ns, name, script, env, logDir);
      r.procs.push(proc);
      return proc;
    },
    stop: stopAll,
    eventLoop: () => loop.summary(),
    diagnose: () =>
      [
        loop.summary(),
        "last errors logged:",
        ...lastErrors([...logsIn(logDir), ...natsLogs], 12).map((l) => `  ${l}`),
      ].join("\n"),
  };
}

export async function startTwoRegionsNetns(o: NetnsTwoRegionOptions = {}): Promise<NetnsTwoRegions> {
  if (process.getuid?.() !== 0)
    throw new Error("startTwoRegionsNetns needs root (ip netns, veth, bridge); CI runs as root");
  const p = plan();
  const latencyMs = o.latencyMs ?? 30;
  const logDir = mkdtempSync(join(tmpdir(), "pipeline-regions-netns-"));
  const cleanups: Array<() => Promise<void>> = [];
  const natsLogs: LogFile[] = [];
  // The relays and the emulator run on this process's event loop: its stalls are the WAN's.
  const loop = watchEventLoop({ stallMs: 250 });
  cleanups.push(async () => loop.stop());
  const tmp = (prefix: string) => {
    const d = mkdtempSync(join(tmpdir(), prefix));
    cleanups.push(async () => {
      // A nats-server's log outlives its store, beside the apps' logs.
      if (existsSync(join(d, "nats-server.log")))
        copyFileSync(join(d, "nats-server.log"), join(logDir, `${prefix.replace(/-$/, "")}.log`));
      rmSync(d, { recursive: true, force: true });
    });
    natsLogs.push({ file: join(d, "nats-server.log"), name: prefix.replace(/-$/, "") });
    return d;
  };
  const stopAll = guardTeardown(planNames(p), cleanups);
  try {
    buildNetwork(p);
    loop.reset(); // the blocking setup above ran before any relay: not the WAN's stall

    // The provider: reachable from every region over its access link.
    const emu = createEmulator({
      port: 0,
      host: "0.0.0.0",
      keys: { [PROVIDER_KEY]: { threads: 1000 } },
      latencyMs: 50,
      ...o.emulator,
    });
    await emu.start();
    cleanups.push(() => emu.stop());
    const emuPort = Number(new URL(emu.url).port);

    const relay = async (to: { host: string; port: number }) => {
      const r = await startRelay(to, { listenHost: p.bridgeIp, delayMs: latencyMs });
      cleanups.push(() => r.stop());
      return r;
    };
    const ctx: NetnsContext = { p, o, logDir, cleanups, tmp, relay };
    const witnessNodes = await startWitness(ctx);
    const witness = witnessNodes[0]!;
    const { pa, pb, a, b, regionLink } = await startRegionServers(ctx);
    const regions: [NetnsRegion, NetnsRegion] = [
      await startRegion(ctx, pa, a, witnessNodes, emuPort),
      await startRegion(ctx, pb, b, witnessNodes, emuPort),
    ];
    await waitForLeases(regions);
    await waitForMirrors(regions);
    return netnsHandle({
      p,
      emu,
      witness,
      witnessNodes,
      regions,
      regionLink,
      logDir,
      latencyMs,
      loop,
      natsLogs,
      stopAll,
    });
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** `recovery assess` against one region from this machine (async: the relays here keep working meanwhile). */
export async function assessRegionAsync(
  two: NetnsTwoRegions,
  r: NetnsRegion,
): Promise<{ code: number | null; out: string }> {
  const w = two.witness.auth("recovery");
  const env = {
    ...natsEnv(r.nats, "recovery"),
    NATS_URL: r.nats.url,
    DATABASE_URL: r.tdb.url,
    REGION: r.name,
    REGIONS: REGIONS.join(","),
    WITNESS_URL: two.witness.url,
    WITNESS_USER: w.user!,
    WITNESS_PASSWORD: w.pass!,
    SNAPSHOT_DIR: mkdtempSync(join(tmpdir(), "regions-assess-")),
  };
  try {
    const { code, out, err } = await spawnRecoveryCli(["assess"], env);
    return { code, out: `${out}${err}` };
  } finally {
    rmSync(env.SNAPSHOT_DIR, { recursive: true, force: true });
  }
}
