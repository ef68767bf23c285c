// Two regions on one machine: each its own nats-server (its own JetStream domain), database,
// gateway, solver and recovery service (replicator and lease keeper); a witness nats-server
// holding the region leases; one provider (the emulator). The links that cross regions go
// through relays the tests can cut: fsn1's leafnode link (hel1 -> fsn1) and each region's
// connection to the witness.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { freePort, type NatsServerHandle, natsEnv, startNatsServer, waitForPort } from "@pipeline/devstack";
import { createTestDatabase, eventually, type TestDatabase } from "@pipeline/devstack/testing";
import { createEmulator, type Emulator, type EmulatorOptions } from "@pipeline/emulator";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { openRegionBucket } from "@pipeline/shared/kv";
import { connectNats } from "@pipeline/shared/nats";
import { provisionRegionsAt } from "@pipeline/shared/provision";
import { LeaseView, maySubmit } from "@pipeline/shared/regions";
import { eventSubject, streams } from "@pipeline/shared/subjects";
import { type Proc, spawnApp } from "../harness.ts";
import { type Relay, startRelay } from "./relay.ts";

export const REGIONS = ["fsn1", "hel1"] as const;
export const PROVIDER_KEY = "regions-provider-key";
export const API_KEY = "regions-client-key-0001";

export interface Region {
  name: string;
  nats: NatsServerHandle;
  tdb: TestDatabase;
  db: Database;
  gatewayUrl: string;
  procs: Proc[];
  /** This region's link to the witness. */
  witnessLink: Relay;
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
}

export async function startTwoRegions(o: TwoRegionOptions = {}): Promise<TwoRegions> {
  const logDir = mkdtempSync(join(tmpdir(), "pipeline-regions-"));
  const emu = createEmulator({ port: 0, keys: { [PROVIDER_KEY]: { threads: 1000 } }, latencyMs: 50, ...o.emulator });
  await emu.start();
  const witness = await startNatsServer({
    port: await freePort(),
    storeDir: mkdtempSync(join(tmpdir(), "nats-witness-")),
    name: "witness-1",
  });
  const leafPort = await freePort();
  const regionLink = await startRelay({ host: "127.0.0.1", port: leafPort });
  const a = await startNatsServer({
    port: await freePort(),
    storeDir: mkdtempSync(join(tmpdir(), "nats-fsn1-")),
    name: "fsn1-1",
    regions: ["fsn1"],
    domain: "fsn1",
    // hel1 must keep reaching fsn1 through the relay, also after a reconnect.
    leafnodes: { listenPort: leafPort, advertise: `127.0.0.1:${regionLink.port}` },
  });
  const b = await startNatsServer({
    port: await freePort(),
    storeDir: mkdtempSync(join(tmpdir(), "nats-hel1-")),
    name: "hel1-1",
    regions: ["hel1"],
    domain: "hel1",
    leafnodes: { remotes: [{ host: "127.0.0.1", port: regionLink.port, credentials: a.leafCredentials }] },
  });

  const startRegion = async (name: string, nats: NatsServerHandle): Promise<Region> => {
    const tdb = await createTestDatabase(`reg_${name}`);
    const witnessLink = await startRelay({ host: "127.0.0.1", port: witness.port });
    const w = witness.auth("recovery");
    const common = {
      NATS_URL: nats.url,
      DATABASE_URL: tdb.url,
      REGION: name,
      REGIONS: REGIONS.join(","),
      LOG_LEVEL: "info",
    };
    const port = await freePort();
    // The region's topology first, as its recovery service makes it at start: the apps wait for it.
    await provisionRegionsAt(nats.url, nats.auth("admin"), [name]);
    const procs = [
      // The gateway and the solver with their own database roles (issue 34); recovery is the owner.
      spawnApp(
        `gateway-${name}`,
        "apps/gateway/src/main.ts",
        {
          ...common,
          DATABASE_URL: tdb.appUrls.gateway,
          ...natsEnv(nats, "gateway"),
          GATEWAY_PORT: String(port),
          API_KEYS: API_KEY,
        },
        logDir,
      ),
      spawnApp(
        `solver-${name}`,
        "apps/solver/src/main.ts",
        {
          ...common,
          DATABASE_URL: tdb.appUrls.solver,
          ...natsEnv(nats, "solver"),
          WORKER_ID: `solver-${name}`,
          PROVIDER_URL: emu.url,
          PROVIDER_KEY,
          FIRST_POLL_MS: "50",
          POLL_INTERVAL_MS: "100",
          METRICS_PORT: "0",
          WEBHOOK_SECRET: "regions-webhook-secret",
          ...o.solverEnv,
        },
        logDir,
      ),
      spawnApp(
        `recovery-${name}`,
        "apps/recovery/src/main.ts",
        {
          ...common,
          ...natsEnv(nats, "recovery"),
          // A short sweep: it must leave the other region's rows alone.
          SNAPSHOT_INTERVAL_MS: "0",
          SWEEP_INTERVAL_MS: "1000",
          STALE_AFTER_MS: "3000",
          GATEWAY_PUBLISH_GRACE_MS: "0",
          DATA_DIR: mkdtempSync(join(tmpdir(), `regions-${name}-`)),
          WITNESS_URL: `nats://127.0.0.1:${witnessLink.port}`,
          WITNESS_USER: w.user!,
          WITNESS_PASSWORD: w.pass!,
          LEASE_TTL_MS: String(o.leaseTtlMs ?? 4000),
          LEASE_MARGIN_MS: String(o.leaseMarginMs ?? 1000),
          LEASE_RENEW_MS: String(o.leaseRenewMs ?? 300),
          ADOPT_UNCERTAIN_MS: String(o.adoptUncertainMs ?? 20_000),
        },
        logDir,
      ),
    ];
    await waitForPort(port, 20_000);
    return {
      name,
      nats,
      tdb,
      db: openDatabase(tdb.url, { max: 2 }),
      gatewayUrl: `http://127.0.0.1:${port}`,
      procs,
      witnessLink,
    };
  };
  const regions: [Region, Region] = [await startRegion("fsn1", a), await startRegion("hel1", b)];
  await waitForLeases(regions);
  await waitForMirrors(regions);
  return {
    emu,
    witness,
    regions,
    regionLink,
    logDir,
    isolate(name) {
      regionLink.cut();
      regions.find((r) => r.name === name)!.witnessLink.cut();
    },
    heal() {
      regionLink.heal();
      for (const r of regions) r.witnessLink.heal();
    },
    async stop() {
      for (const r of regions) await Promise.all(r.procs.map((p) => p.kill("SIGTERM")));
      await emu.stop();
      for (const r of regions) {
        await r.db.close();
        await r.witnessLink.stop();
        await r.nats.stop();
        await r.tdb.drop();
      }
      await regionLink.stop();
      await witness.stop();
    },
  };
}

/** Ready when each region holds its lease (its gateway turns tasks away until then). */
export async function waitForLeases(regions: Array<Pick<Region, "name" | "nats">>): Promise<void> {
  for (const r of regions) {
    const nc = await connectNats(r.nats.url, "two-regions-ready", r.nats.auth("admin"));
    try {
      const kv = await openRegionBucket(nc, r.name);
      await eventually(
        async () => {
          const e = await kv.get("lease");
          return e?.operation === "PUT" && maySubmit(LeaseView.parse(e.json()), r.name, Date.now());
        },
        30_000,
        100,
      );
    } finally {
      await nc.close();
    }
  }
}

/**
 * Ready when each region's EVENTS reaches the other region's mirror (the path every replica row
 * takes): a probe event (no task: the replicator skips it) published in each region must show up
 * in the other's `EVENTS_<region>`. A mirror whose first attempts failed (the leafnode link still
 * coming up) retries with a backoff of its own; a drill that starts its load before then measures
 * that backoff as RPO, not the steady replication lag.
 */
export async function waitForMirrors(regions: Array<Pick<Region, "name" | "nats">>): Promise<void> {
  for (const from of regions) {
    const src = await connectNats(from.nats.url, "two-regions-mirror-probe", from.nats.auth("admin"));
    try {
      await jetstream(src).publish(
        eventSubject(from.name, "probe"),
        JSON.stringify({ kind: "probe", region: from.name, at: new Date().toISOString() }),
      );
      const seq = (await (await jetstreamManager(src)).streams.info(streams.events(from.name))).state.last_seq;
      for (const to of regions.filter((r) => r.name !== from.name)) {
        const dst = await connectNats(to.nats.url, "two-regions-mirror-wait", to.nats.auth("admin"));
        try {
          const jsm = await jetstreamManager(dst);
          await eventually(
            async () =>
              ((await jsm.streams.info(streams.events(from.name)).catch(() => undefined))?.state.last_seq ?? 0) >= seq,
            60_000,
            200,
          );
        } finally {
          await dst.close();
        }
      }
    } finally {
      await src.close();
    }
  }
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
  type: "turnstile",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/r/${i}` },
});

export interface Acked {
  id: string;
  /** The region whose gateway answered 202. */
  region: string;
  at: number;
}

/**
 * Submits `perSecond` tasks a second through each region's gateway, each with its own
 * Idempotency-Key; a client whose gateway does not answer retries on the other region with the
 * same key (what a client of a lost region does). Collects every 202.
 */
export function steadyLoad(regions: Region[], perSecond: number, prefix = "load") {
  const acked: Acked[] = [];
  let refused = 0;
  let n = 0;
  let running = true;
  const submit = async (r: Region, i: number) => {
    const key = `${prefix}-${r.name}-${i}`;
    const body = turnstile(key);
    for (const target of [r, ...regions.filter((x) => x !== r)]) {
      const res = await call<{ id: string }>(target, "/v1/tasks", {
        method: "POST",
        body,
        headers: { "idempotency-key": key },
      }).catch(() => undefined);
      if (res?.status === 202) {
        acked.push({ id: res.body.id, region: target.name, at: Date.now() });
        return;
      }
    }
    refused++;
  };
  const loops = regions.map(async (r) => {
    while (running) {
      const t0 = Date.now();
      void submit(r, n++);
      await Bun.sleep(Math.max(0, 1000 / perSecond - (Date.now() - t0)));
    }
  });
  return {
    acked,
    refused: () => refused,
    async stop() {
      running = false;
      await Promise.all(loops);
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
