import { hostname } from "node:os";
import { type Database, openDatabase } from "@pipeline/shared/db";
import type { GroupOf } from "@pipeline/shared/fair-share";
import { bindBucket, incarnationId, newIncarnation } from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";
import {
  connectNats,
  createPubAckPublisher,
  type NatsConnection,
  natsAuthFromEnv,
  TOPOLOGY_WAIT_MS,
} from "@pipeline/shared/nats";
import { watchFence } from "@pipeline/shared/regions";
import { buckets, streams } from "@pipeline/shared/subjects";
import { createDeliveryStore } from "./adapters/deliveries.ts";
import type { LiveConfig } from "./adapters/live-config.ts";
import type { MemoryGovernor } from "./adapters/memory.ts";
import { addSolverGauges, createSolverMetrics } from "./adapters/metrics.ts";
import { createEventSink } from "./adapters/nats.ts";
import { createProviderSlots, type ProviderSlots } from "./adapters/slots.ts";
import type { SolverConfig } from "./config.ts";
import type { Breaker } from "./domain/breaker.ts";
import { FairScheduler } from "./domain/fair-share.ts";
import type { KeyRing } from "./domain/keyring.ts";
import type { Dispatcher } from "./notifier/dispatcher.ts";
import { type Accounts, accountsOf } from "./wiring/accounts.ts";
import { startBalances } from "./wiring/balances.ts";
import { type Callbacks, createCallbackDispatcher, startCallbacks } from "./wiring/callbacks.ts";
import { startReaper, startSolverHeartbeat } from "./wiring/fleet.ts";
import { startKeys } from "./wiring/keys.ts";
import {
  breakerFactory,
  memoryGovernorOf,
  providerClientOf,
  providerWindowOf,
  serveMetrics,
  type Tally,
  timingOf,
} from "./wiring/parts.ts";
import { startReports } from "./wiring/reports.ts";
import { openTaskTopology } from "./wiring/topology.ts";
import { createSolverWorker } from "./wiring/worker.ts";
import type { ProviderWindow } from "./worker/provider-window.ts";
import type { Worker } from "./worker/worker.ts";

export interface SolverService {
  workerId: string;
  metricsUrl: string;
  /** The breaker of the key in use. */
  readonly breaker: Breaker;
  keys: KeyRing;
  config: LiveConfig;
  worker: Worker;
  memory: MemoryGovernor;
  /** Graceful stop: drain in-flight work (up to DRAIN_TIMEOUT_MS), then close NATS and Postgres. */
  stop(): Promise<void>;
}

/**
 * The solver's pool, and the checkpoints' own (adapters/pg.ts). Custom plans
 * (plan_cache_mode=force_custom_plan): a prepared statement is planned for each execution with
 * the table as it is now, not once as a generic plan cached while `tasks` was small (a fresh
 * deployment, a bench) and kept until the next ANALYZE: that plan scanned the table for every
 * batched write (bench/profile.ts, PROFILE_EXPLAIN=1). Planning costs a few µs per statement;
 * the per-task writes are batched.
 */
function openPools(config: SolverConfig, workerId: string) {
  return {
    database: openDatabase(config.DATABASE_URL, {
      max: config.DB_POOL_MAX,
      appName: `solver-${workerId}`,
      customPlans: true,
    }),
    checkpoints: openDatabase(config.DATABASE_URL, {
      max: 4,
      appName: `solver-${workerId}-checkpoint`,
      customPlans: true,
    }),
  };
}

/**
 * Wires config -> adapters -> worker and starts it, each part built once, after what it uses: the
 * metrics first (the parts count into them), their gauges once the parts they read exist; the
 * timing in use before the live config that applies revisions to it and the worker that reads it.
 */
export async function startSolver(config: SolverConfig, log: Logger): Promise<SolverService> {
  // An incarnation per process start: a process started again under the same WORKER_ID holds its
  // claims under a new id, so its predecessor's are taken over at once (adapters/reaper.ts).
  const name = config.WORKER_ID ?? `${hostname().slice(0, 32)}-${process.pid}`;
  const workerId = incarnationId(name, newIncarnation());
  const p = await buildSolver(config, workerId, log);
  const { nc, js, jsm, database, slots, worker, keyRing, liveConfig, dispatcher, deliveries } = p;
  let ready = false;
  const metricsServer = serveMetrics(config, p.metrics, () => ready && !nc.isClosed());
  slots.start();
  worker.start();
  const workersKv = await bindBucket(nc, buckets.workers(config.REGION), { waitMs: TOPOLOGY_WAIT_MS });
  const inFlight = () => worker.inFlight();
  const heartbeat = startSolverHeartbeat({
    kv: workersKv,
    config,
    workerId,
    keyRing,
    liveConfig,
    inFlight,
    tally: p.tally,
    ...(p.window ? { concurrencyLimits: p.window.limits } : {}),
    log,
  });
  const reaper = startReaper({ config, database, js, kv: workersKv, workerId, groupOf: p.groups.groupOf, log });
  const callbacks: Callbacks | undefined = dispatcher
    ? await startCallbacks({ config, jsm, js, dispatcher, deliveries, log })
    : undefined;
  if (!callbacks) log.warn("WEBHOOK_SECRET unset: task callbacks are not sent");
  const { accounts } = p;
  const reports = startReports({ config, database, provider: p.provider, keyRing, accounts, metrics: p.metrics, log });
  const balances = startBalances({ config, database, provider: p.provider, keyRing, accounts, log });
  ready = true;
  const metricsUrl = `http://${config.METRICS_HOST}:${metricsServer.port}/metrics`;
  logStarted(log, config, workerId, metricsUrl);
  return {
    workerId,
    metricsUrl,
    get breaker() {
      return keyRing.breaker(keyRing.current().ref);
    },
    keys: keyRing,
    config: liveConfig,
    worker,
    memory: p.memory,
    async stop() {
      ready = false;
      await stopSolver(log, {
        ...p,
        reaper,
        callbacks,
        reports,
        balances,
        metricsServer,
        heartbeat,
        pools: [database, p.checkpoints],
      });
    },
  };
}

/** The parts, built in order (see startSolver), none started yet; the gauges added. */
async function buildSolver(config: SolverConfig, workerId: string, log: Logger) {
  const metrics = createSolverMetrics();
  const nc = await connectNats(config.NATS_URL, `solver-${workerId}`, natsAuthFromEnv(config), (e) =>
    log.error({ err: e.message }, "nats error"),
  );
  const topology = await openTaskTopology(nc, config, workerId, log);
  const { jsm, js, consumers } = topology;
  const { database, checkpoints } = openPools(config, workerId);
  const accounts = accountsOf(config);
  // Weighted fair share of the threads among the region's fair-share groups (docs/fair-share.md).
  const fair = new FairScheduler({ weightOf: topology.groups.weightOf });
  const slots = slotsOf(database, config, workerId, log, accounts, fair);
  // Each event waits for its PubAck through one subscription (pub-acks.ts): three per task.
  const events = createEventSink(createPubAckPublisher(nc), config.REGION, (err) =>
    log.warn({ err: err.message }, "event not published"),
  );
  const { timing, keyRing, liveConfig } = await keysOf({ nc, config, events, workerId, metrics, log, accounts });
  const tally: Tally = { providerCalls: 0, providerErrors: 0 };
  const provider = providerClientOf(config, metrics, tally, accounts);
  const fence = await fenceOf(nc, config, log);
  const onConsumerMissing = (lane: Parameters<typeof topology.recreate>[0], what: string) =>
    void topology.recreate(lane, what);
  const window = providerWindowOf(config, accounts, log);
  const worker = createSolverWorker({
    window,
    config,
    workerId,
    nc,
    consumers,
    database,
    checkpoints,
    provider,
    slots,
    keyRing,
    events,
    fence,
    timing,
    metrics,
    onConsumerMissing,
    accounts,
    fair,
    groupSources: topology.groups,
    log,
  });
  const deliveries = createDeliveryStore(database.db);
  const dispatcher: Dispatcher | undefined = config.WEBHOOK_SECRET
    ? createCallbackDispatcher({ config, deliveries, workerId, metrics, log })
    : undefined;
  const memory = memoryGovernorOf(config, () => worker.inFlight());
  addGauges(metrics, { config, keyRing, worker, memory, slots, dispatcher, deliveries, consumers, jsm, window });
  const built = {
    nc,
    jsm,
    js,
    database,
    checkpoints,
    slots,
    keyRing,
    liveConfig,
    tally,
    fence,
    worker,
    provider,
    accounts,
    window,
    groups: topology.groups,
  };
  return { ...built, deliveries, dispatcher, memory, metrics };
}

/**
 * The timing in use, then the key ring and the live config that applies revisions to it; a
 * breaker's transitions are published as alerts.
 */
async function keysOf(d: {
  nc: NatsConnection;
  config: SolverConfig;
  events: ReturnType<typeof createEventSink>;
  workerId: string;
  metrics: ReturnType<typeof createSolverMetrics>;
  accounts: Accounts;
  log: Logger;
}) {
  const { nc, config, log, accounts } = d;
  const timing = timingOf(config);
  const makeBreaker = breakerFactory(
    config,
    (data) => void d.events.alert("breaker", { ...data, worker: d.workerId }),
    log,
  );
  const onRejected = () => d.metrics.event("configRejected");
  return { timing, ...(await startKeys({ nc, config, timing, makeBreaker, onRejected, accounts, log })) };
}

/** This solver's leases of the fleet-wide provider thread plan. */
function slotsOf(
  database: Database,
  config: SolverConfig,
  workerId: string,
  log: Logger,
  accounts: Accounts,
  fair: FairScheduler,
) {
  return createProviderSlots(database.db.$client, {
    rank: (group) => fair.rank(group),
    owner: workerId,
    region: config.REGION,
    threads: config.PROVIDER_THREADS,
    threadsOf: accounts.threadsOfRef,
    // Several regions: one plan per account across them, this region's share leased (docs/regions.md).
    shared: config.regions.length > 1,
    leaseMs: config.SLOT_LEASE_MS,
    markerMs: config.PROVIDER_TIMEOUT_MS + 5000,
    onError: (err) => log.warn({ err: err.message.slice(0, 200) }, "provider slot lease failed"),
  });
}

/** With several regions, new provider submissions only while this region holds its lease; one region: none. */
async function fenceOf(nc: NatsConnection, config: SolverConfig, log: Logger) {
  if (config.regions.length <= 1) return undefined;
  const bucket = await bindBucket(nc, buckets.region(config.REGION), { waitMs: TOPOLOGY_WAIT_MS });
  return watchFence(bucket, config.REGION, log);
}

/** The gauges, read from the parts once they exist. */
function addGauges(
  metrics: ReturnType<typeof createSolverMetrics>,
  p: {
    config: SolverConfig;
    keyRing: KeyRing;
    worker: Worker;
    memory: MemoryGovernor;
    slots: ProviderSlots;
    window: ProviderWindow | undefined;
    dispatcher: Dispatcher | undefined;
    deliveries: ReturnType<typeof createDeliveryStore>;
    consumers: Parameters<typeof addSolverGauges>[1]["consumers"];
    jsm: Parameters<typeof addSolverGauges>[1]["jsm"];
  },
): void {
  const { keyRing, worker, memory, dispatcher, deliveries } = p;
  addSolverGauges(metrics, {
    keyRef: () => keyRing.current().ref,
    breakerState: () => keyRing.breaker(keyRing.current().ref).state(),
    inFlight: () => worker.inFlight(),
    waiting: () => worker.waiting(),
    gc: () => ({ collections: memory.collections(), seconds: memory.collectMs() / 1000 }),
    slotsHeld: () => p.slots.held(keyRing.current().ref),
    ...(p.window ? { concurrencyLimits: p.window.limits } : {}),
    ...(dispatcher ? { webhookInFlight: () => dispatcher.inFlight(), webhookBacklog: () => deliveries.backlog() } : {}),
    consumers: p.consumers,
    jsm: p.jsm,
    dlqStream: streams.dlq(p.config.REGION),
  });
}

function logStarted(log: Logger, config: SolverConfig, workerId: string, metricsUrl: string): void {
  log.info(
    {
      workerId,
      metrics: metricsUrl,
      region: config.REGION,
      version: config.SOLVER_VERSION,
      concurrency: config.SOLVER_CONCURRENCY,
    },
    "solver started",
  );
}

/** The graceful stop: no new work, in-flight work drained, then the slots given back and the connections closed. */
async function stopSolver(
  log: Logger,
  p: {
    liveConfig: LiveConfig;
    fence: { stop(): void } | undefined;
    groups: { stop(): void; groupOf: GroupOf };
    reaper: { stop(): void };
    worker: Worker;
    callbacks: Callbacks | undefined;
    reports: { stop(): Promise<void> };
    balances: { stop(): Promise<void> };
    slots: ProviderSlots;
    memory: MemoryGovernor;
    metricsServer: { stop(force: boolean): Promise<void> };
    heartbeat: { stop(): Promise<void> };
    nc: NatsConnection;
    pools: Database[];
  },
): Promise<void> {
  log.info({ inFlight: p.worker.inFlight() }, "solver draining");
  p.liveConfig.stop();
  p.fence?.stop();
  p.groups.stop();
  p.reaper.stop();
  await Promise.all([p.worker.stop(), p.callbacks?.stop(), p.reports.stop(), p.balances.stop()]);
  await p.slots.stop();
  p.memory.stop();
  await p.metricsServer.stop(true);
  await p.heartbeat.stop();
  await p.nc.drain().catch(() => {});
  await Promise.all(p.pools.map((d) => d.close().catch(() => {})));
  log.info({ counters: p.worker.counters }, "solver stopped");
}
