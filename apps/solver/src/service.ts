import { hostname } from "node:os";
import { jetstream, jetstreamManager, type Consumer } from "@nats-io/jetstream";
import { openDatabase } from "@pipeline/shared/db";
import type { Logger } from "@pipeline/shared/log";
import { connectNats, natsAuthFromEnv, ensureConsumer, ensureStreams, notifierConsumerConfig } from "@pipeline/shared/nats";
import type { Priority } from "@pipeline/shared/schemas";
import { laneConsumer, LANES, streams } from "@pipeline/shared/subjects";
import { createDeliveryStore } from "./adapters/deliveries.ts";
import { createSolverMetrics, type SolverMetrics } from "./adapters/metrics.ts";
import { createEventSink } from "./adapters/nats.ts";
import { createNotifier } from "./notifier/notifier.ts";
import { createDispatcher, type Dispatcher } from "./notifier/dispatcher.ts";
import { pinnedPost, systemResolve } from "./adapters/callback-http.ts";
import { createSolverStore } from "./adapters/pg.ts";
import { createBulkPoller } from "./adapters/bulk-poller.ts";
import { createProviderClient } from "./adapters/provider.ts";
import { createProviderSlots } from "./adapters/slots.ts";
import { ensureVersionConsumers, HEARTBEAT_EVERY_MS, openConfigBucket, openRegionBucket, openRolloutBucket, openWorkersBucket, reapDeadWorkers, watchFence } from "@pipeline/shared/runtime";

import { startHeartbeat } from "./adapters/heartbeat.ts";
import { createSleeper } from "./worker/sleeps.ts";
import { startMemoryGovernor, type MemoryGovernor } from "./adapters/memory.ts";
import { keySource, startLiveConfig, type LiveConfig } from "./adapters/live-config.ts";
import { createBreaker, type Breaker } from "./domain/breaker.ts";
import { createKeyRing, type KeyRing, type ProviderKeyInUse } from "./domain/keyring.ts";
import { createPermits } from "./domain/permits.ts";
import type { SolverConfig } from "./config.ts";
import { createWorker, type Worker } from "./worker/worker.ts";

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

/** Wires config -> adapters -> worker and starts it. */
export async function startSolver(config: SolverConfig, log: Logger): Promise<SolverService> {
  const workerId = config.WORKER_ID ?? `${hostname()}-${process.pid}`;
  const nc = await connectNats(config.NATS_URL, `solver-${workerId}`, natsAuthFromEnv(config), (e) => log.error({ err: e.message }, "nats error"));
  const jsm = await jetstreamManager(nc);
  await ensureStreams(jsm, { region: config.REGION, replicas: config.STREAM_REPLICAS });
  // This version's lane consumers filter the shards the region's assignment gives it (all of them
  // for the first version of a region; none, an idle filter, for a new version until the rollout
  // moves shards to it): runtime/shards.ts.
  const rolloutKv = await openRolloutBucket(nc, config.REGION);
  const versionConsumers = () => ensureVersionConsumers(jsm, rolloutKv, { region: config.REGION, version: config.SOLVER_VERSION, ackWaitMs: config.ACK_WAIT_MS, by: `solver ${workerId}` });
  await versionConsumers();
  const js = jetstream(nc);
  const consumers = {} as Record<Priority, Consumer>;
  for (const lane of LANES) consumers[lane] = await js.consumers.get(streams.tasks(config.REGION), laneConsumer(config.REGION, lane, config.SOLVER_VERSION));
  const database = openDatabase(config.DATABASE_URL, { max: config.DB_POOL_MAX, appName: `solver-${workerId}` });
  const checkpoints = openDatabase(config.DATABASE_URL, { max: 4, appName: `solver-${workerId}-checkpoint` });
  const slots = createProviderSlots(database.db);
  const events = createEventSink(js, config.REGION, (err) => log.warn({ err: err.message }, "event not published"));
  const makeBreaker = ({ ref: keyRef }: ProviderKeyInUse) => createBreaker(
    {
      failureRate: config.BREAKER_FAILURE_RATE,
      minCalls: config.BREAKER_MIN_CALLS,
      windowMs: config.BREAKER_WINDOW_MS,
      cooldownMs: config.BREAKER_COOLDOWN_MS,
      maxCooldownMs: config.BREAKER_MAX_COOLDOWN_MS,
    },
    Date.now,
    (state, reason) => {
      (state === "open" ? log.error.bind(log) : log.warn.bind(log))({ keyRef, state, reason }, `provider breaker ${state}`);
      void events.alert("breaker", { keyRef, state, reason: reason ?? null, worker: workerId });
    },
  );
  const timing = {
    leaseMs: config.LEASE_MS,
    firstPollMs: config.FIRST_POLL_MS,
    pollIntervalMs: config.POLL_INTERVAL_MS,
    maxPolls: config.MAX_POLLS,
    maxResubmits: config.MAX_RESUBMITS,
    maxAttempts: config.MAX_ATTEMPTS,
    slotWaitMs: config.SLOT_WAIT_MS,
    providerTimeoutMs: config.PROVIDER_TIMEOUT_MS,
    tokenTtlMs: config.TOKEN_TTL_MS,
    retryBaseMs: config.RETRY_BASE_MS,
    retryMaxMs: config.RETRY_MAX_MS,
  };
  // The key and the live-tunable timing come from the region's config bucket (zod-checked; an
  // invalid revision is refused and the last good one stays), else from the environment.
  let keys: KeyRing | undefined;
  let metrics: SolverMetrics | undefined;
  const liveConfig = await startLiveConfig({
    kv: await openConfigBucket(nc, config.REGION),
    keys: keySource({ keyName: config.PROVIDER_KEY_NAME, key: config.PROVIDER_KEY, file: config.PROVIDER_KEYS_FILE }),
    defaultKeyName: config.PROVIDER_KEY_NAME,
    envTiming: { pollIntervalMs: config.POLL_INTERVAL_MS, maxPolls: config.MAX_POLLS, maxResubmits: config.MAX_RESUBMITS },
    async apply(key, live) {
      await slots.ensure(key.ref, config.PROVIDER_THREADS);
      Object.assign(timing, live);
      if (!keys) keys = createKeyRing(key, makeBreaker);
      else if (keys.current().ref !== key.ref) {
        log.warn({ from: keys.current().ref, to: key.ref, keyName: key.name }, "provider key rotated: new calls use the new key");
        keys.use(key);
      }
    },
    onRejected: () => metrics?.event("configRejected"),
    log,
  });
  const keyRing = keys!;
  // Queue loss: the TASKS stream (or a lane consumer) vanished. The stream and consumers are
  // recreated here so that new tasks flow again at once; `rebuild-queue` (or the recovery
  // service's sweep) re-publishes the unfinished tasks whose messages were lost.
  let recreating: Promise<void> | undefined;
  const recreateTopology = (lane: Priority, what: string) =>
    (recreating ??= (async () => {
      log.error({ lane, what }, "task consumer missing: recreating the TASKS topology (run `recovery rebuild-queue` to re-publish lost messages)");
      // Several solvers notice at once; creating a stream or a consumer that another one has just
      // created is a no-op on the current server, so each simply ensures the topology.
      for (let i = 0; ; i++) {
        try {
          await ensureStreams(jsm, { region: config.REGION, replicas: config.STREAM_REPLICAS });
          await versionConsumers();
          log.warn({ lane }, "TASKS topology recreated");
          return;
        } catch (err) {
          if (i % 10 === 0) log.warn({ err: (err as Error).message }, "recreating the TASKS topology failed; retrying");
          await Bun.sleep(500 + Math.random() * 1000);
        }
      }
    })().finally(() => (recreating = undefined)));
  // Counted for the heartbeat: the rollout's gate compares versions by these (apps/rollout).
  const tally = { providerCalls: 0, providerErrors: 0 };
  const provider = createProviderClient({ url: config.PROVIDER_URL, timeoutMs: config.PROVIDER_TIMEOUT_MS, maxConcurrent: config.PROVIDER_MAX_CONNECTIONS, onReply: (c, r) => {
      metrics?.reply(c, r);
      tally.providerCalls++;
      if (r.kind === "error" || r.kind === "transport") tally.providerErrors++;
    },
  });
  const poller = config.BULK_POLL ? createBulkPoller(provider) : undefined;
  // With several regions, new provider submissions only while this region holds its lease.
  const fence = config.regions.length > 1 ? watchFence(await openRegionBucket(nc, config.REGION), config.REGION, log) : undefined;
  const worker = createWorker({
    ...(poller ? { poller } : {}),
    ...(fence ? { fence } : {}),
    admission: createPermits(config.SOLVER_START_CONCURRENCY),
    workerId,
    consumers,
    store: createSolverStore(database.db, checkpoints.sql, config.REGION),
    provider,
    slots,
    keys: keyRing,
    threads: config.PROVIDER_THREADS,
    highReserved: config.HIGH_LANE_RESERVED,
    events,
    log,
    profile: config.PROVIDER_PROFILE,
    counters: {},
    sleeper: createSleeper(),
    metrics: {
      event: (e) => metrics?.event(e),
      solved: (t, sec) => metrics?.solved(t, sec),
      outcome: (k) => metrics?.outcome(k),
    },
    onConsumerMissing: (lane, what) => void recreateTopology(lane, what),
    ackPublish: (subject, payload) => nc.publish(subject, payload),
    concurrency: config.SOLVER_CONCURRENCY,
    fetchBatch: config.SOLVER_FETCH_BATCH,
    ackWaitMs: config.ACK_WAIT_MS,
    drainTimeoutMs: config.DRAIN_TIMEOUT_MS,
    timing,
  });
  let dispatcher: Dispatcher | undefined;
  const deliveries = createDeliveryStore(database.db);
  metrics = createSolverMetrics({
    keyRef: () => keyRing.current().ref,
    breakerState: () => keyRing.breaker(keyRing.current().ref).state(),
    inFlight: () => worker.inFlight(),
    waiting: () => worker.waiting(),
    gc: () => ({ collections: memory.collections(), seconds: memory.collectMs() / 1000 }),
    slotsHeld: () => slots.held(keyRing.current().ref),
    ...(config.WEBHOOK_SECRET ? { webhookInFlight: () => dispatcher?.inFlight() ?? 0, webhookBacklog: () => deliveries.backlog() } : {}),
    consumers,
    jsm,
    dlqStream: streams.dlq(config.REGION),
  });
  const m = metrics;
  // `/readyz` answers 200 once the solver is consuming and until it starts to drain: what the deploy
  // command waits for after a restart (infra/deploy). Nothing else in the answer.
  let ready = false;
  const metricsServer = Bun.serve({
    hostname: config.METRICS_HOST,
    port: config.METRICS_PORT,
    fetch: (req) => {
      const path = new URL(req.url).pathname;
      if (path === "/metrics") return m.response();
      if (path === "/readyz") return ready && !nc.isClosed() ? new Response("ok\n") : new Response("down\n", { status: 503 });
      return new Response("not found", { status: 404 });
    },
  });
  const MB = 1024 * 1024;
  const memory = startMemoryGovernor({
    checkMs: 25,
    growthBytes: config.GC_GROWTH_MB * MB,
    softLimitBytes: config.GC_SOFT_LIMIT_MB * MB,
    growthAboveLimitBytes: config.GC_GROWTH_ABOVE_LIMIT_MB * MB,
    maxCpuShareAboveLimit: config.GC_MAX_CPU_PERCENT / 100,
  });
  worker.start();
  const startedAt = new Date().toISOString();
  const workersKv = await openWorkersBucket(nc, config.REGION);
  const heartbeat = startHeartbeat(
    workersKv,
    () => {
      const key = keyRing.current();
      const st = liveConfig.status();
      return {
        workerId,
        pid: process.pid,
        host: hostname(),
        version: config.SOLVER_VERSION,
        startedAt,
        inFlight: worker.inFlight(),
        keyName: key.name,
        keyRef: key.ref,
        breaker: keyRing.breaker(key.ref).state(),
        configRevision: st.revision,
        configRejected: st.rejected,
        tally: { ...tally },
      };
    },
    log,
  );
  // Peers' silence: a solver killed -9 has its leases and provider slots released within
  // DEAD_AFTER_MS plus one round, instead of its LEASE_MS/ACK_WAIT_MS; sooner (one missed beat
  // plus one round) when its Postgres sessions are gone too (runtime/reaper.ts).
  let reaping = false;
  const reaper =
    config.DEAD_AFTER_MS > 0
      ? setInterval(() => {
          if (reaping) return;
          reaping = true;
          reapDeadWorkers({
            sql: database.db.$client,
            js,
            workers: workersKv,
            region: config.REGION,
            deadAfterMs: config.DEAD_AFTER_MS,
            self: workerId,
            // Killed -9: its sessions (named as the pools above) are gone, so it is dead after one missed beat.
            sessionName: (id) => `solver-${id}`,
            sessionsGoneAfterMs: Math.min(config.DEAD_AFTER_MS, HEARTBEAT_EVERY_MS + 1000),
          })
            .then((r) => r.dead.length && log.warn(r, "dead solvers: their task leases and provider slots released, their tasks queued again"))
            .catch((err: Error) => log.warn({ err: err.message }, "dead-worker check failed"))
            .finally(() => (reaping = false));
        }, config.REAP_INTERVAL_MS + Math.floor(Math.random() * 500))
      : undefined;
  let notifier: ReturnType<typeof createNotifier> | undefined;
  if (config.WEBHOOK_SECRET) {
    // The notifier records each final state's callback in webhook_deliveries (and acks the
    // event); the dispatcher sends them from the table, with the SSRF policy at send time.
    if (config.WEBHOOK_ALLOW_HTTP || config.WEBHOOK_ALLOW_PRIVATE)
      log.warn({ WEBHOOK_ALLOW_HTTP: config.WEBHOOK_ALLOW_HTTP, WEBHOOK_ALLOW_PRIVATE: config.WEBHOOK_ALLOW_PRIVATE }, "callback SSRF policy loosened: for dev stacks and tests only");
    dispatcher = createDispatcher({
      store: deliveries,
      secrets: [config.WEBHOOK_SECRET, ...(config.WEBHOOK_SECRET_PREVIOUS ? [config.WEBHOOK_SECRET_PREVIOUS] : [])],
      policy: { allowHttp: config.WEBHOOK_ALLOW_HTTP, allowPrivate: config.WEBHOOK_ALLOW_PRIVATE },
      resolve: systemResolve,
      post: pinnedPost(),
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      retryBaseMs: config.WEBHOOK_RETRY_BASE_MS,
      retryMaxMs: config.WEBHOOK_RETRY_MAX_MS,
      maxAttempts: config.WEBHOOK_MAX_ATTEMPTS,
      maxAgeMs: config.WEBHOOK_MAX_AGE_MS,
      concurrency: config.WEBHOOK_CONCURRENCY,
      tenantMaxInFlight: config.WEBHOOK_TENANT_MAX_IN_FLIGHT,
      hostMaxInFlight: config.WEBHOOK_HOST_MAX_IN_FLIGHT,
      pollMs: config.WEBHOOK_POLL_MS,
      workerId,
      log,
      metrics: { attempt: (r) => m.webhookAttempt(r), outcome: (o) => m.webhookOutcome(o) },
    });
    const ncfg = notifierConsumerConfig(config.REGION);
    await ensureConsumer(jsm, streams.events(config.REGION), ncfg);
    const d = dispatcher;
    notifier = createNotifier({
      consumer: await js.consumers.get(streams.events(config.REGION), ncfg.durable_name),
      store: deliveries,
      onRecorded: () => d.kick(),
      retryBaseMs: config.WEBHOOK_RETRY_BASE_MS,
      concurrency: 50,
      log,
    });
    dispatcher.start();
    notifier.start();
  } else log.warn("WEBHOOK_SECRET unset: task callbacks are not sent");
  ready = true;
  log.info({ workerId, metrics: `http://${config.METRICS_HOST}:${metricsServer.port}/metrics`, region: config.REGION, version: config.SOLVER_VERSION, concurrency: config.SOLVER_CONCURRENCY }, "solver started");
  return {
    workerId,
    metricsUrl: `http://${config.METRICS_HOST}:${metricsServer.port}/metrics`,
    get breaker() {
      return keyRing.breaker(keyRing.current().ref);
    },
    keys: keyRing,
    config: liveConfig,
    worker,
    memory,
    async stop() {
      ready = false;
      log.info({ inFlight: worker.inFlight() }, "solver draining");
      liveConfig.stop();
      fence?.stop();
      if (reaper) clearInterval(reaper);
      await Promise.all([worker.stop(), notifier?.stop(), dispatcher?.stop()]);
      memory.stop();
      await metricsServer.stop(true);
      await heartbeat.stop();
      await nc.drain().catch(() => {});
      await Promise.all([database.close().catch(() => {}), checkpoints.close().catch(() => {})]);
      log.info({ counters: worker.counters }, "solver stopped");
    },
  };
}
