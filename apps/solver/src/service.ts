import { hostname } from "node:os";
import { jetstream, jetstreamManager, type Consumer } from "@nats-io/jetstream";
import { openDatabase } from "@pipeline/shared/db";
import type { Logger } from "@pipeline/shared/log";
import { connectNats, ensureLaneConsumers, ensureStreams } from "@pipeline/shared/nats";
import type { Priority } from "@pipeline/shared/schemas";
import { laneConsumer, LANES, streams } from "@pipeline/shared/subjects";
import { createEventSink } from "./adapters/nats.ts";
import { createSolverStore } from "./adapters/pg.ts";
import { createProviderClient } from "./adapters/provider.ts";
import type { SolverConfig } from "./config.ts";
import { createWorker, type Worker } from "./worker/worker.ts";

export interface SolverService {
  workerId: string;
  worker: Worker;
  /** Graceful stop: drain in-flight work (up to DRAIN_TIMEOUT_MS), then close NATS and Postgres. */
  stop(): Promise<void>;
}

/** Wires config -> adapters -> worker and starts it. */
export async function startSolver(config: SolverConfig, log: Logger): Promise<SolverService> {
  const workerId = config.WORKER_ID ?? `${hostname()}-${process.pid}`;
  const nc = await connectNats(config.NATS_URL, `solver-${workerId}`);
  const jsm = await jetstreamManager(nc);
  await ensureStreams(jsm, { region: config.REGION });
  await ensureLaneConsumers(jsm, { region: config.REGION, version: config.SOLVER_VERSION, ackWaitMs: config.ACK_WAIT_MS });
  const js = jetstream(nc);
  const consumers = {} as Record<Priority, Consumer>;
  for (const lane of LANES) consumers[lane] = await js.consumers.get(streams.tasks(config.REGION), laneConsumer(config.REGION, lane, config.SOLVER_VERSION));
  const database = openDatabase(config.DATABASE_URL, { max: config.DB_POOL_MAX, appName: `solver-${workerId}` });
  const providerKey = config.PROVIDER_KEY;
  const worker = createWorker({
    workerId,
    consumers,
    store: createSolverStore(database.db),
    provider: createProviderClient({ url: config.PROVIDER_URL, key: () => providerKey, timeoutMs: config.PROVIDER_TIMEOUT_MS }),
    events: createEventSink(js, config.REGION, (err) => log.warn({ err: err.message }, "event not published")),
    log,
    profile: config.PROVIDER_PROFILE,
    counters: {},
    concurrency: config.SOLVER_CONCURRENCY,
    fetchBatch: config.SOLVER_FETCH_BATCH,
    ackWaitMs: config.ACK_WAIT_MS,
    drainTimeoutMs: config.DRAIN_TIMEOUT_MS,
    timing: {
      leaseMs: config.LEASE_MS,
      firstPollMs: config.FIRST_POLL_MS,
      pollIntervalMs: config.POLL_INTERVAL_MS,
      maxPolls: config.MAX_POLLS,
      maxResubmits: config.MAX_RESUBMITS,
      tokenTtlMs: config.TOKEN_TTL_MS,
      retryBaseMs: config.RETRY_BASE_MS,
      retryMaxMs: config.RETRY_MAX_MS,
    },
  });
  worker.start();
  log.info({ workerId, region: config.REGION, version: config.SOLVER_VERSION, concurrency: config.SOLVER_CONCURRENCY }, "solver started");
  return {
    workerId,
    worker,
    async stop() {
      log.info({ inFlight: worker.inFlight() }, "solver draining");
      await worker.stop();
      await nc.drain().catch(() => {});
      await database.close().catch(() => {});
      log.info({ counters: worker.counters }, "solver stopped");
    },
  };
}
