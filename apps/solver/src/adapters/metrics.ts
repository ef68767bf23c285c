import type { Consumer, JetStreamManager } from "@nats-io/jetstream";
import { Counter, createRegistry, Gauge, Histogram, metricsResponse, SOLVE_BUCKETS } from "@pipeline/shared/metrics";
import type { ProviderReply } from "@pipeline/shared/provider";
import type { Priority } from "@pipeline/shared/schemas";
import type { BreakerState } from "../domain/breaker.ts";

const BREAKER_VALUE: Record<BreakerState, number> = { closed: 0, half_open: 1, open: 2 };

export interface SolverMetricSources {
  /** The key in use (it changes on rotation: the gauges then drop the old label). */
  keyRef: () => string;
  breakerState: () => BreakerState;
  inFlight: () => number;
  /** Of those, the ones in the waiting room (their provider task running). */
  waiting?: () => number;
  /** The memory governor's collections so far and the time they took. */
  gc?: () => { collections: number; seconds: number };
  slotsHeld: () => Promise<number>;
  /** The adaptive window's limit per account (ADAPTIVE_CONCURRENCY=1); absent: no gauge. */
  concurrencyLimits?: () => Record<string, { limit: number; plan: number; held: number }>;
  /** Callback attempts in flight in this process, and the fleet's pending callbacks (when callbacks are on). */
  webhookInFlight?: () => number;
  webhookBacklog?: () => Promise<{ pending: number; lagSeconds: number }>;
  consumers: Record<Priority, Consumer>;
  jsm: JetStreamManager;
  dlqStream: string;
}

/**
 * The solver's Prometheus counters and histograms, what its parts count into: built before them.
 * The gauges, which read the parts at scrape time, are added once the parts exist (`addSolverGauges`).
 */
export function createSolverMetrics() {
  const registry = createRegistry("solver");
  const outcomes = new Counter({
    name: "solver_outcomes_total",
    help: "Messages handled, by outcome (ack, nak, term)",
    labelNames: ["kind"],
    registers: [registry],
  });
  const events = new Counter({
    name: "solver_worker_events_total",
    help: "Worker events: dedup acks, redeliveries, resumed polls, slot and breaker waits, dead letters...",
    labelNames: ["event"],
    registers: [registry],
  });
  const replies = new Counter({
    name: "solver_provider_replies_total",
    help: "Provider replies by call, kind and code",
    labelNames: ["call", "kind", "code"],
    registers: [registry],
  });
  const solve = new Histogram({
    name: "solver_solve_duration_seconds",
    help: "From acceptance to completed, by task type",
    labelNames: ["type"],
    buckets: SOLVE_BUCKETS,
    registers: [registry],
  });
  const webhookAttempts = new Counter({
    name: "solver_webhook_attempts_total",
    help: "Callback attempts by result: delivered, http_error (not 2xx), unreachable, dns_error",
    labelNames: ["result"],
    registers: [registry],
  });
  const webhookOutcomes = new Counter({
    name: "solver_webhook_deliveries_total",
    help: "Callbacks ended, by outcome: delivered, failed (retry limit reached), refused (SSRF policy at send time), superseded (a redrive)",
    labelNames: ["outcome"],
    registers: [registry],
  });
  for (const outcome of ["delivered", "failed", "refused", "superseded"]) webhookOutcomes.inc({ outcome }, 0);
  const reports = new Counter({
    name: "pipeline_reports_total",
    help: "Client reports the provider recorded, by provider account, task type, site key, solver version and verdict (good/bad): the acceptance rate is good / (good + bad)",
    labelNames: ["provider", "type", "sitekey", "version", "verdict"],
    registers: [registry],
  });
  return {
    registry,
    webhookAttempt: (result: string) => webhookAttempts.inc({ result }),
    webhookOutcome: (outcome: string) => webhookOutcomes.inc({ outcome }),
    outcome: (kind: string) => outcomes.inc({ kind }),
    event: (event: string) => events.inc({ event }),
    reply: (call: string, r: ProviderReply) =>
      replies.inc({ call, kind: r.kind, code: r.kind === "error" ? r.code : "" }),
    solved: (type: string, seconds: number) => solve.observe({ type }, seconds),
    reportRecorded: (l: {
      provider: string;
      type: string;
      sitekey: string;
      version: string;
      verdict: "good" | "bad";
    }) => reports.inc(l),
    response: () => metricsResponse(registry),
  };
}
export type SolverMetrics = ReturnType<typeof createSolverMetrics>;

/** The solver's gauges, on the metrics' registry: each read from its source at scrape time (those that need I/O too). */
export function addSolverGauges(metrics: SolverMetrics, src: SolverMetricSources): void {
  const { registry } = metrics;
  addProcessGauges(registry, src);
  addProviderGauges(registry, src);
  addWindowGauges(registry, src);
  addQueueGauges(registry, src);
  addWebhookGauges(registry, src);
}

type Registry = SolverMetrics["registry"];

/** Tasks in flight and waiting in this process, and the memory governor's collections. */
function addProcessGauges(registry: Registry, src: SolverMetricSources): void {
  new Gauge({
    name: "solver_in_flight",
    help: "Tasks this process is handling",
    registers: [registry],
    collect() {
      this.set(src.inFlight());
    },
  });
  // Counters mirrored from the governor at scrape time: incremented by what it did since the last scrape.
  const mirrored = (name: string, help: string, read: () => number) => {
    let seen = 0;
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        const now = read();
        if (now > seen) this.inc(now - seen);
        seen = now;
      },
    });
  };
  mirrored(
    "solver_gc_collections_total",
    "Full garbage collections the memory governor ran (GC_GROWTH_MB, GC_SOFT_LIMIT_MB)",
    () => src.gc?.().collections ?? 0,
  );
  mirrored("solver_gc_seconds_total", "Time the memory governor's collections took", () => src.gc?.().seconds ?? 0);
  new Gauge({
    name: "solver_waiting",
    help: "Tasks of this process waiting for the provider's answer (the waiting room)",
    registers: [registry],
    collect() {
      this.set(src.waiting?.() ?? 0);
    },
  });
}

/** The key in use: its breaker, and its provider tasks in flight across the fleet. */
function addProviderGauges(registry: Registry, src: SolverMetricSources): void {
  new Gauge({
    name: "solver_breaker_state",
    help: "Circuit breaker per provider key: 0 closed, 1 half-open, 2 open",
    labelNames: ["key"],
    registers: [registry],
    collect() {
      this.reset();
      this.set({ key: src.keyRef() }, BREAKER_VALUE[src.breakerState()]);
    },
  });
  new Gauge({
    name: "pipeline_provider_tasks_in_flight",
    help: "Provider tasks in flight across the fleet, per key, as the plan counts them (a provider id, or a recent submit marker); at most PROVIDER_THREADS",
    labelNames: ["key"],
    registers: [registry],
    async collect() {
      const v = await src.slotsHeld().catch(() => Number.NaN);
      this.reset();
      this.set({ key: src.keyRef() }, v);
    },
  });
}

/** The adaptive window per account (ADAPTIVE_CONCURRENCY=1): its limit now and the places held; labelled by key reference, never the key. */
function addWindowGauges(registry: Registry, src: SolverMetricSources): void {
  const read = src.concurrencyLimits;
  if (!read) return;
  const gauge = (name: string, help: string, field: "limit" | "held") =>
    new Gauge({
      name,
      help,
      labelNames: ["key_ref"],
      registers: [registry],
      collect() {
        this.reset();
        for (const [keyRef, v] of Object.entries(read())) this.set({ key_ref: keyRef }, v[field]);
      },
    });
  gauge(
    "solver_provider_concurrency_limit",
    "Adaptive limit of provider tasks this solver keeps at the account (ADAPTIVE_CONCURRENCY; between 1 and the plan)",
    "limit",
  );
  gauge(
    "solver_provider_concurrency_held",
    "Provider tasks this solver holds at the account (the adaptive window's places in use)",
    "held",
  );
}

/** The lanes' consumers (lag, unacknowledged) and the DLQ. */
function addQueueGauges(registry: Registry, src: SolverMetricSources): void {
  const consumerGauge = (name: string, help: string, field: "num_pending" | "num_ack_pending") =>
    new Gauge({
      name,
      help,
      labelNames: ["lane"],
      registers: [registry],
      async collect() {
        for (const [lane, c] of Object.entries(src.consumers)) {
          const info = await c.info().catch(() => undefined);
          this.set({ lane }, info?.[field] ?? Number.NaN);
        }
      },
    });
  consumerGauge("pipeline_consumer_pending", "Messages waiting in a lane's consumer (lag)", "num_pending");
  consumerGauge(
    "pipeline_consumer_ack_pending",
    "Messages delivered and not yet acknowledged, per lane",
    "num_ack_pending",
  );
  new Gauge({
    name: "pipeline_dlq_messages",
    help: "Dead-lettered tasks kept in the DLQ stream",
    registers: [registry],
    async collect() {
      const info = await src.jsm.streams.info(src.dlqStream).catch(() => undefined);
      this.set(info?.state.messages ?? Number.NaN);
    },
  });
}

/** Callbacks: this process's attempts in flight, the fleet's pending ones and how overdue they are. */
function addWebhookGauges(registry: Registry, src: SolverMetricSources): void {
  new Gauge({
    name: "solver_webhook_in_flight",
    help: "Callback attempts this process has in flight",
    registers: [registry],
    collect() {
      this.set(src.webhookInFlight?.() ?? 0);
    },
  });
  const backlog = async () =>
    src.webhookBacklog
      ? await src.webhookBacklog().catch(() => ({ pending: Number.NaN, lagSeconds: Number.NaN }))
      : { pending: 0, lagSeconds: 0 };
  new Gauge({
    name: "pipeline_webhook_deliveries_pending",
    help: "Callbacks not yet delivered nor given up, fleet-wide (webhook_deliveries)",
    registers: [registry],
    async collect() {
      this.set((await backlog()).pending);
    },
  });
  new Gauge({
    name: "pipeline_webhook_delivery_lag_seconds",
    help: "How long the most overdue pending callback has been due (0 when none is): grows when the dispatchers fall behind or a cap holds callbacks back",
    registers: [registry],
    async collect() {
      this.set((await backlog()).lagSeconds);
    },
  });
}
