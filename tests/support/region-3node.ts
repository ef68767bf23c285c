// One region as production runs it: a 3-node NATS cluster (the apps get all three URLs and
// STREAM_REPLICAS=3), its Postgres database, the provider emulator, a gateway, two solvers and the
// recovery service, started by @pipeline/devstack/stack's `startStack` with a server source whose
// NATS "server" is the cluster. Plus what a drill on it needs: waiting until every stream and
// bucket has its three copies current (after a node came back), an open-loop load through the
// gateway's REST API that counts the requests that did not get a 2xx, and what the solvers' logs
// say the kills cost.
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { type NatsCluster, startNatsCluster } from "@pipeline/devstack";
import { type RegionStack, recoveryEnv, type StackHandle, startStack, testServers } from "@pipeline/devstack/stack";
import { eventually } from "@pipeline/devstack/testing";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";

export const API_KEY = "region-3node-client-key-0001";

/**
 * Every stream of the account (TASKS, EVENTS, DLQ, BODIES and the buckets' KV_ streams) with a
 * leader and its `replicas - 1` followers current: what "the node came back and caught up" means.
 * The streams not there yet, as text (empty when all are).
 */
export async function notCaughtUp(jsm: JetStreamManager, replicas: number): Promise<string[]> {
  const behind: string[] = [];
  for await (const si of jsm.streams.list()) {
    const c = si.cluster;
    const followers = c?.replicas ?? [];
    if (si.config.num_replicas !== replicas || !c?.leader || followers.length !== replicas - 1)
      behind.push(`${si.config.name}: R${si.config.num_replicas}, leader ${c?.leader ?? "none"}`);
    else if (!followers.every((f) => f.current))
      behind.push(`${si.config.name}: ${followers.filter((f) => !f.current).map((f) => `${f.name} behind`)}`);
  }
  return behind;
}

export interface Region3Node {
  stack: StackHandle;
  region: RegionStack;
  cluster: NatsCluster;
  /** The admin's connection to every node (the test's own reads and writes). */
  admin: NatsConnection;
  /** Starts the recovery service with STREAM_REPLICAS=3 (it provisions the region at start). */
  startRecovery(): void;
  stop(): Promise<void>;
}

/**
 * The region with its gateway and two solvers running; the recovery service is started by the
 * caller (`startRecovery`) once it has written what the region holds before (the stack itself
 * provisions the region first with the default, one copy: a region made before its buckets were
 * replicated).
 */
export async function startRegion3Node(o: { region: string; emulatorLatencyMs: number }): Promise<Region3Node> {
  const base = testServers();
  let cluster: NatsCluster | undefined;
  const env = { STREAM_REPLICAS: "3" };
  const stack = await startStack({
    regions: [o.region],
    servers: {
      ...base,
      async nats(site) {
        cluster = await startNatsCluster(site.name, site.regions);
        return cluster.handle;
      },
      async stop() {
        await cluster?.handle.stop().catch(() => {});
        await base.stop();
      },
    },
    emulator: { latencyMs: o.emulatorLatencyMs },
    apps: { solvers: 2, recovery: false },
    apiKeys: API_KEY,
    env: { gateway: env, solver: { ...env, PROVIDER_THREADS: "1000" }, recovery: env },
  });
  const region = stack.regions[0]!;
  const admin = await connectNats(region.nats.url, "region-3node-drill", region.nats.auth("admin"));
  return {
    stack,
    region,
    cluster: cluster!,
    admin,
    startRecovery() {
      const dataDir = mkdtempSync(join(tmpdir(), `stack-${o.region}-`));
      const p = stack.launcher("recovery", "apps/recovery/src/main.ts", {
        ...recoveryEnv(region.wiring, { dataDir }),
        ...env,
      });
      region.procs.push(p);
      region.recovery = p;
    },
    async stop() {
      await admin.close().catch(() => {});
      await stack.stop();
    },
  };
}

export interface OpenLoad {
  /** Tasks the gateway accepted (a 2xx with an id), by id, when. */
  accepted: Map<string, number>;
  /** Requests that did not get a 2xx (a refusal or no answer), by status (0: no answer). */
  errors: Map<number, number>;
  /** Stops starting new tasks; resolves when every started one was accepted or gave up. */
  stop(): Promise<void>;
  /** Tasks given up on (no 2xx within `giveUpMs`). */
  gaveUp(): number;
  /** The longest a task waited for its 2xx, retries included (ms). */
  slowestMs(): number;
}

/**
 * An open-loop load: one new task every 1000/`perSecond` ms whatever the answers, each submitted
 * with its own Idempotency-Key and retried every 200 ms until a 2xx (as a client would).
 */
export function openLoad(gatewayUrl: string, prefix: string, perSecond: number, giveUpMs = 60_000): OpenLoad {
  const accepted = new Map<string, number>();
  const errors = new Map<number, number>();
  let gaveUp = 0;
  let slowest = 0;
  let stopped = false;
  const started: Promise<void>[] = [];
  const submit = async (i: number) => {
    const from = Date.now();
    const until = from + giveUpMs;
    while (Date.now() < until) {
      const res = await fetch(`${gatewayUrl}/v1/tasks`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${API_KEY}`,
          "content-type": "application/json",
          "idempotency-key": `${prefix}-${i}`,
        },
        body: JSON.stringify({
          type: "turnstile",
          params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/${prefix}/${i}` },
        }),
        signal: AbortSignal.timeout(10_000),
      }).catch(() => undefined);
      const status = res?.status ?? 0;
      const body = res ? ((await res.json().catch(() => ({}))) as { id?: string }) : {};
      if (status >= 200 && status < 300 && body.id) {
        if (!accepted.has(body.id)) accepted.set(body.id, Date.now());
        slowest = Math.max(slowest, Date.now() - from);
        return;
      }
      errors.set(status, (errors.get(status) ?? 0) + 1);
      await Bun.sleep(200);
    }
    gaveUp++;
  };
  const t0 = Date.now();
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      started.push(submit(i));
      await Bun.sleep(Math.max(0, t0 + ((i + 1) * 1000) / perSecond - Date.now()));
    }
  })();
  return {
    accepted,
    errors,
    gaveUp: () => gaveUp,
    slowestMs: () => slowest,
    async stop() {
      stopped = true;
      await loop;
      await Promise.all(started);
    },
  };
}

/** What the solvers' logs say the kills cost them: events not published, heartbeats not written, solvers taken for dead (and their tasks queued again). */
export function solverTally(logDir: string): {
  eventsLost: number;
  heartbeatsMissed: number;
  declaredDead: number;
  requeued: number;
} {
  const t = { eventsLost: 0, heartbeatsMissed: 0, declaredDead: 0, requeued: 0 };
  for (const f of readdirSync(logDir).filter((x) => /^solver.*\.log$/.test(x))) {
    for (const raw of readFileSync(join(logDir, f), "utf8").split("\n")) {
      if (!raw.startsWith("{")) continue;
      const l = JSON.parse(raw) as { msg?: string; dead?: string[]; tasks?: number };
      if (l.msg === "event not published") t.eventsLost++;
      else if (l.msg === "heartbeat not written") t.heartbeatsMissed++;
      else if (l.msg?.startsWith("dead solvers:")) {
        t.declaredDead += l.dead?.length ?? 0;
        t.requeued += l.tasks ?? 0;
      }
    }
  }
  return t;
}
