// Two regions on one machine: @pipeline/devstack/stack's `startStack` with fsn1 and hel1, each its
// own nats-server (its own JetStream domain), database, gateway, solver and recovery service
// (replicator and lease keeper); a witness nats-server holding the region leases; one provider
// (the emulator). The links that cross regions go through relays the tests can cut: fsn1's
// leafnode link (hel1 -> fsn1) and each region's connection to the witness.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Client, createClient, homeRegionOfId } from "@pipeline/client";
import { type NatsServerHandle, natsEnv } from "@pipeline/devstack";
import { type RegionWiring, type Relay, type StackDatabase, startStack, testServers } from "@pipeline/devstack/stack";
import { eventually } from "@pipeline/devstack/testing";
import type { Emulator, EmulatorOptions } from "@pipeline/emulator";
import type { Database } from "@pipeline/shared/db";
import type { Proc } from "../harness.ts";

export { waitForLeases, waitForMirrors } from "@pipeline/devstack/stack";
export { PROVIDER_KEY } from "@pipeline/devstack/testing";

export const REGIONS = ["fsn1", "hel1"] as const;
export const API_KEY = "regions-client-key-0001";

export interface Region {
  name: string;
  nats: NatsServerHandle;
  tdb: StackDatabase;
  db: Database;
  gatewayUrl: string;
  procs: Proc[];
  /** This region's link to the witness. */
  witnessLink: Relay;
  /** What its apps connect to (@pipeline/devstack/stack's app-env builds each app's settings from it). */
  wiring: RegionWiring;
}

export interface TwoRegions {
  emu: Emulator;
  witness: NatsServerHandle;
  regions: [Region, Region];
  /** The leafnode link between the regions. */
  regionLink: Relay;
  logDir: string;
  /** Cuts a region off from the other region and from the witness. */
  isolate(name: string): void;
  heal(): void;
  stop(): Promise<void>;
}

export interface TwoRegionOptions {
  emulator?: Partial<EmulatorOptions>;
  /** Lease timing of the keepers (short in tests). */
  leaseTtlMs?: number;
  leaseMarginMs?: number;
  leaseRenewMs?: number;
  adoptUncertainMs?: number;
  solverEnv?: Record<string, string>;
  recoveryEnv?: Record<string, string>;
}

export async function startTwoRegions(o: TwoRegionOptions = {}): Promise<TwoRegions> {
  const system = await startStack({
    regions: [...REGIONS],
    servers: testServers(),
    relayed: true,
    emulator: { latencyMs: 50, ...o.emulator },
    apiKeys: API_KEY,
    env: { ...(o.solverEnv ? { solver: o.solverEnv } : {}), ...(o.recoveryEnv ? { recovery: o.recoveryEnv } : {}) },
    lease: {
      ...(o.leaseTtlMs ? { ttlMs: o.leaseTtlMs } : {}),
      ...(o.leaseMarginMs ? { marginMs: o.leaseMarginMs } : {}),
      ...(o.leaseRenewMs ? { renewMs: o.leaseRenewMs } : {}),
      ...(o.adoptUncertainMs ? { adoptUncertainMs: o.adoptUncertainMs } : {}),
    },
  });
  const regions = system.regions.map((r) => ({
    name: r.name,
    nats: r.nats,
    tdb: r.database,
    db: r.db,
    gatewayUrl: r.gatewayUrl,
    procs: r.procs,
    witnessLink: r.witnessLink!,
    wiring: r.wiring,
  })) as [Region, Region];
  const regionLink = system.regionLink!;
  return {
    emu: system.emu!,
    witness: system.witness!,
    regions,
    regionLink,
    logDir: system.logDir,
    isolate(name) {
      regionLink.cut();
      regions.find((r) => r.name === name)!.witnessLink.cut();
    },
    heal() {
      regionLink.heal();
      for (const r of regions) r.witnessLink.heal();
    },
    stop: system.stop,
  };
}

/** A JSON call to a region's gateway with the test client's key. */
export async function call<T>(
  r: Region,
  path: string,
  init: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: T; headers: Headers }> {
  const res = await fetch(`${r.gatewayUrl}${path}`, {
    method: init.method ?? "GET",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json", ...init.headers },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  return { status: res.status, body: (await res.json().catch(() => null)) as T, headers: res.headers };
}

export const turnstile = (i: number | string) => ({
  type: "turnstile" as const,
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/r/${i}` },
});

export interface Acked {
  id: string;
  /** The region whose gateway answered 202 (the task id's home region). */
  region: string;
  at: number;
}

/** One @pipeline/client per region: that region first, the others after it. */
function regionClients(regions: Region[]): Map<Region, Client> {
  const names = Object.fromEntries(regions.map((x) => [x.name, x.gatewayUrl]));
  return new Map(
    regions.map((r) => {
      const urls = [r, ...regions.filter((x) => x !== r)].map((x) => x.gatewayUrl);
      const c = createClient({
        regions: urls,
        apiKey: API_KEY,
        regionNames: names,
        regionOrder: [...REGIONS],
        failBackMs: 5000,
        // A write that timed out may have been applied; sent to the other region while the two are
        // cut apart, it would be a second task (the key has not replicated): patience first.
        timeoutMs: 20_000,
      });
      return [r, c] as const;
    }),
  );
}

/** The clients' own counts, summed: retries, failovers, fail-backs and failed tries by kind. */
function sumStats(clients: Client[]) {
  const sum = { requests: 0, retries: 0, failovers: 0, failbacks: 0, errors: {} as Record<string, number> };
  for (const c of clients) {
    const st = c.stats();
    sum.requests += st.requests;
    sum.retries += st.retries;
    sum.failovers += st.failovers;
    sum.failbacks += st.failbacks;
    for (const [k, v] of Object.entries(st.errors)) sum.errors[k] = (sum.errors[k] ?? 0) + v;
  }
  return sum;
}

/**
 * Submits `perSecond` tasks a second through each region, each through @pipeline/client (what a
 * client of ours sees): one client per region with that region first and the other after it, an
 * Idempotency-Key per task reused on every retry and region, failover on 503/connection errors
 * (x-try-regions) and fail-back after a probe. Collects every 202; `errors()` counts the
 * client-observed errors: submits the client gave up on after its own retries and failover.
 */
export function steadyLoad(regions: Region[], perSecond: number, prefix = "load") {
  const acked: Acked[] = [];
  const failures: string[] = [];
  let n = 0;
  let running = true;
  const order = REGIONS as readonly string[];
  const clients = regionClients(regions);
  const inFlight = new Set<Promise<void>>();
  const submit = async (r: Region, i: number) => {
    const key = `${prefix}-${r.name}-${i}`;
    try {
      const a = await clients.get(r)!.submit(turnstile(key), { idempotencyKey: key });
      acked.push({ id: a.id, region: homeRegionOfId(a.id, order) ?? r.name, at: Date.now() });
    } catch (err) {
      failures.push(`${key}: ${(err as Error).message}`);
    }
  };
  const loops = regions.map(async (r) => {
    // The load starts once the region accepts (holds its lease): a 503 before that would send its
    // client to the other region until its fail-back probe, and the drill would measure less of it.
    await eventually(
      async () => (await fetch(`${r.gatewayUrl}/readyz/accepting`).catch(() => undefined))?.status === 200,
      30_000,
      100,
    );
    while (running) {
      const t0 = Date.now();
      const p = submit(r, n++);
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
      await Bun.sleep(Math.max(0, 1000 / perSecond - (Date.now() - t0)));
    }
  });
  const clientStats = () => sumStats([...clients.values()]);
  return {
    acked,
    /** Client-observed errors: submits that failed after the client's retries and failover. */
    errors: () => failures.length,
    failures,
    clientStats,
    /** One phrase for a drill line: `client-observed errors 0 (12 retries, 2 failovers, failed tries: 503 x10, connection x2)`. */
    describe: () => {
      const st = clientStats();
      const tries = Object.entries(st.errors)
        .map(([k, v]) => `${k} x${v}`)
        .join(", ");
      return `client-observed errors ${failures.length} (${st.retries} retries, ${st.failovers} failovers, ${st.failbacks} fail-backs${tries ? `; failed tries: ${tries}` : ""})`;
    },
    async stop() {
      running = false;
      await Promise.all(loops);
      await Promise.all([...inFlight]);
      await Bun.sleep(1000);
    },
  };
}

/** `recovery assess` against one region, as an operator there runs it: its output and exit code. */
export function assessRegion(two: TwoRegions, r: Region): { code: number | null; out: string } {
  const w = two.witness.auth("recovery");
  const env = {
    ...process.env,
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
  const p = Bun.spawnSync(
    [process.execPath, join(import.meta.dir, "..", "..", "apps", "recovery", "src", "cli.ts"), "assess"],
    { env, stdout: "pipe", stderr: "pipe" },
  );
  return { code: p.exitCode, out: `${p.stdout.toString()}${p.stderr.toString()}` };
}
