// The worker from the solver's parts: what it pulls, where it writes, whom it calls, its limits.
import type { Consumer } from "@nats-io/jetstream";
import type { Database } from "@pipeline/shared/db";
import { HEARTBEAT_EVERY_MS } from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";
import type { NatsConnection } from "@pipeline/shared/nats";
import type { Fence } from "@pipeline/shared/regions";
import type { Priority } from "@pipeline/shared/schemas";
import { createBulkPoller } from "../adapters/bulk-poller.ts";
import type { SolverMetrics } from "../adapters/metrics.ts";
import type { createEventSink } from "../adapters/nats.ts";
import { createSolverStore } from "../adapters/pg.ts";
import type { ProviderClient } from "../adapters/provider.ts";
import type { ProviderSlots } from "../adapters/slots.ts";
import type { SolverConfig } from "../config.ts";
import type { LedgerContext } from "../domain/charge.ts";
import type { FairScheduler } from "../domain/fair-share.ts";
import type { KeyRing } from "../domain/keyring.ts";
import { createPermits } from "../domain/permits.ts";
import { pullExpiresMs } from "../domain/pull-expiry.ts";
import type { TimingReader } from "../domain/timing.ts";
import type { ProviderWindow } from "../worker/provider-window.ts";
import { createSleeper } from "../worker/sleeps.ts";
import { createWorker, type GroupSources } from "../worker/worker.ts";
import type { Accounts } from "./accounts.ts";

export function createSolverWorker(d: {
  config: SolverConfig;
  workerId: string;
  nc: NatsConnection;
  consumers: Record<Priority, Consumer>;
  database: Database;
  checkpoints: Database;
  provider: ProviderClient;
  slots: ProviderSlots;
  keyRing: KeyRing;
  events: ReturnType<typeof createEventSink>;
  fence: Fence | undefined;
  timing: TimingReader;
  metrics: SolverMetrics;
  onConsumerMissing: (lane: Priority, what: string) => void;
  accounts: Accounts;
  /** The adaptive window (ADAPTIVE_CONCURRENCY=1). */
  window?: ProviderWindow | undefined;
  /** Weighted fair share among the fair-share groups, and their consumers. */
  fair: FairScheduler;
  groupSources: GroupSources;
  log: Logger;
}) {
  const { config } = d;
  const poller = config.BULK_POLL ? createBulkPoller(d.provider) : undefined;
  return createWorker({
    ...(poller ? { poller } : {}),
    ...(d.fence ? { fence: d.fence } : {}),
    ...(d.window ? { window: d.window } : {}),
    admission: createPermits(config.SOLVER_START_CONCURRENCY, (g) => d.fair.rank(g)),
    workerId: d.workerId,
    consumers: d.consumers,
    fair: d.fair,
    groupSources: d.groupSources,
    store: createSolverStore(d.database.db, d.checkpoints.sql, config.REGION),
    provider: d.provider,
    slots: d.slots,
    keys: d.keyRing,
    highReserved: config.HIGH_LANE_RESERVED,
    events: d.events,
    log: d.log,
    profile: config.PROVIDER_PROFILE,
    counters: {},
    sleeper: createSleeper(),
    metrics: d.metrics,
    onConsumerMissing: d.onConsumerMissing,
    ackPublish: (subject, payload) => d.nc.publish(subject, payload),
    concurrency: config.SOLVER_CONCURRENCY,
    // Deliveries in their start phase at once: four start admissions' worth, at least 256 (worker.ts createSlots).
    intake: Math.max(256, 4 * config.SOLVER_START_CONCURRENCY),
    fetchBatch: config.SOLVER_FETCH_BATCH,
    ackWaitMs: config.ACK_WAIT_MS,
    pullExpiresMs: pullExpiresMs(config.DEAD_AFTER_MS, HEARTBEAT_EVERY_MS),
    drainTimeoutMs: config.DRAIN_TIMEOUT_MS,
    timing: d.timing,
    ledger: ledgerContextOf(config, d.accounts),
  });
}

/** What the solver's charges share: each account's host and estimates (accounts.ts), the region, the version. */
export function ledgerContextOf(config: SolverConfig, accounts: Accounts): LedgerContext {
  return {
    providerHost: new URL(config.PROVIDER_URL).host,
    region: config.REGION,
    solverVersion: config.SOLVER_VERSION,
    estimates: accounts.terms("default").priceMicros,
    hostOfRef: accounts.hostOfRef,
    estimatesOfRef: accounts.pricesOfRef,
  };
}
