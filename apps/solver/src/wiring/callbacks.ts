// Task callbacks: the notifier records each final state's callback in webhook_deliveries (and
// acks the event); the dispatcher sends them from the table, with the SSRF policy at send time.
// Off without WEBHOOK_SECRET.
import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import type { Logger } from "@pipeline/shared/log";
import { notifierConsumerName, TOPOLOGY_WAIT_MS } from "@pipeline/shared/nats";
import { streams } from "@pipeline/shared/subjects";
import { pinnedPost, systemResolve } from "../adapters/callback-http.ts";
import type { createDeliveryStore } from "../adapters/deliveries.ts";
import type { SolverMetrics } from "../adapters/metrics.ts";
import type { SolverConfig } from "../config.ts";
import { createDispatcher, type Dispatcher } from "../notifier/dispatcher.ts";
import { createNotifier } from "../notifier/notifier.ts";

export interface Callbacks {
  dispatcher: Dispatcher;
  stop(): Promise<void>;
}

export function createCallbackDispatcher(d: {
  config: SolverConfig;
  deliveries: ReturnType<typeof createDeliveryStore>;
  workerId: string;
  metrics: SolverMetrics;
  log: Logger;
}): Dispatcher {
  const { config } = d;
  if (config.WEBHOOK_ALLOW_HTTP || config.WEBHOOK_ALLOW_PRIVATE)
    d.log.warn(
      { WEBHOOK_ALLOW_HTTP: config.WEBHOOK_ALLOW_HTTP, WEBHOOK_ALLOW_PRIVATE: config.WEBHOOK_ALLOW_PRIVATE },
      "callback SSRF policy loosened: for dev stacks and tests only",
    );
  return createDispatcher({
    store: d.deliveries,
    secrets: [config.WEBHOOK_SECRET!, ...(config.WEBHOOK_SECRET_PREVIOUS ? [config.WEBHOOK_SECRET_PREVIOUS] : [])],
    generations: config.WEBHOOK_CLIENT_GENERATIONS,
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
    workerId: d.workerId,
    log: d.log,
    metrics: { attempt: (r) => d.metrics.webhookAttempt(r), outcome: (o) => d.metrics.webhookOutcome(o) },
  });
}

/**
 * Starts the dispatcher and the notifier on EVENTS, on the notifier's consumer (notifierConsumerName:
 * made by the administering side, @pipeline/shared/provision; the solver's user may read it, not
 * create it).
 */
export async function startCallbacks(d: {
  config: SolverConfig;
  jsm: JetStreamManager;
  js: JetStreamClient;
  dispatcher: Dispatcher;
  deliveries: ReturnType<typeof createDeliveryStore>;
  log: Logger;
}): Promise<Callbacks> {
  const name = await notifierConsumerName(d.jsm, d.config.REGION, {
    waitMs: TOPOLOGY_WAIT_MS,
    onWait: (missing) =>
      d.log.warn({ missing }, "waiting for the notifier's consumer (created by the recovery service)"),
  });
  const notifier = createNotifier({
    consumer: await d.js.consumers.get(streams.events(d.config.REGION), name),
    store: d.deliveries,
    onRecorded: () => d.dispatcher.kick(),
    retryBaseMs: d.config.WEBHOOK_RETRY_BASE_MS,
    concurrency: 50,
    log: d.log,
  });
  d.dispatcher.start();
  notifier.start();
  return {
    dispatcher: d.dispatcher,
    stop: async () => void (await Promise.all([notifier.stop(), d.dispatcher.stop()])),
  };
}
