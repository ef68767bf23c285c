// Small builders of the solver's parts, each from the configuration: the breaker per key, the
// timing in use, the provider client with the heartbeat's tallies, the memory governor, the
// metrics and readiness listener.
import type { Logger } from "@pipeline/shared/log";
import { startMemoryGovernor } from "../adapters/memory.ts";
import type { SolverMetrics } from "../adapters/metrics.ts";
import { createProviderClient } from "../adapters/provider.ts";
import type { SolverConfig } from "../config.ts";
import { createBreaker } from "../domain/breaker.ts";
import type { ProviderKeyInUse } from "../domain/keyring.ts";
import { type TimingInUse, timingInUse } from "../domain/timing.ts";
import { createProviderWindow } from "../worker/provider-window.ts";
import type { Accounts } from "./accounts.ts";

/** The breaker of one provider key: state changes logged and published as `breaker` alerts. */
export function breakerFactory(config: SolverConfig, alert: (data: Record<string, unknown>) => void, log: Logger) {
  return ({ ref: keyRef }: ProviderKeyInUse) =>
    createBreaker(
      {
        failureRate: config.BREAKER_FAILURE_RATE,
        minCalls: config.BREAKER_MIN_CALLS,
        windowMs: config.BREAKER_WINDOW_MS,
        cooldownMs: config.BREAKER_COOLDOWN_MS,
        maxCooldownMs: config.BREAKER_MAX_COOLDOWN_MS,
      },
      Date.now,
      (state, reason) => {
        (state === "open" ? log.error.bind(log) : log.warn.bind(log))(
          { keyRef, state, reason },
          `provider breaker ${state}`,
        );
        alert({ keyRef, state, reason: reason ?? null });
      },
    );
}

/** The timing in use, the environment's to begin with: the worker reads it, the live config applies a revision to it. */
export function timingOf(config: SolverConfig): TimingInUse {
  return timingInUse({
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
  });
}

/** Provider replies counted for the heartbeat: the rollout's gate compares versions by these (apps/rollout). */
export interface Tally {
  providerCalls: number;
  providerErrors: number;
}

/** The provider client; every reply goes to the metrics and the tally. */
export function providerClientOf(config: SolverConfig, metrics: SolverMetrics, tally: Tally, accounts?: Accounts) {
  return createProviderClient({
    url: config.PROVIDER_URL,
    ...(accounts?.extras.length ? { urlOfKey: accounts.urlOfKey } : {}),
    timeoutMs: config.PROVIDER_TIMEOUT_MS,
    maxConcurrent: config.PROVIDER_MAX_CONNECTIONS,
    readPrice: config.PROVIDER_PRICE_READ,
    onReply: (c, r) => {
      metrics.reply(c, r);
      tally.providerCalls++;
      if (r.kind === "error" || r.kind === "transport") tally.providerErrors++;
    },
  });
}

const MB = 1024 * 1024;
/** The memory governor; `inFlight`: the worker's tasks in flight (the soft limit's condition). */
export function memoryGovernorOf(config: SolverConfig, inFlight: () => number) {
  return startMemoryGovernor({
    checkMs: 25,
    growthBytes: config.GC_GROWTH_MB * MB,
    softLimitBytes: config.GC_SOFT_LIMIT_MB * MB,
    growthAboveLimitBytes: config.GC_GROWTH_ABOVE_LIMIT_MB * MB,
    maxCpuShareAboveLimit: config.GC_MAX_CPU_PERCENT / 100,
    softLimitApplies: () => inFlight() >= config.GC_SOFT_LIMIT_MIN_IN_FLIGHT,
  });
}

/**
 * `/metrics`, and `/readyz`: 200 once the solver is consuming and until it starts to drain (what
 * the deploy command waits for after a restart, infra/deploy). Nothing else in the answer.
 */
export function serveMetrics(config: SolverConfig, metrics: SolverMetrics, ready: () => boolean) {
  return Bun.serve({
    hostname: config.METRICS_HOST,
    port: config.METRICS_PORT,
    fetch: (req) => {
      const path = new URL(req.url).pathname;
      if (path === "/metrics") return metrics.response();
      if (path === "/readyz") return ready() ? new Response("ok\n") : new Response("down\n", { status: 503 });
      return new Response("not found", { status: 404 });
    },
  });
}

/**
 * The adaptive window per account (ADAPTIVE_CONCURRENCY=1), undefined when off: each account's
 * limit under its plan (a pay-per-solve account's under SOLVER_CONCURRENCY); changes logged.
 */
export function providerWindowOf(config: SolverConfig, accounts: Accounts, log: Logger) {
  if (!config.ADAPTIVE_CONCURRENCY) return undefined;
  return createProviderWindow({
    planOf: (keyRef) => Math.min(accounts.threadsOfRef(keyRef), config.SOLVER_CONCURRENCY),
    profile: config.PROVIDER_PROFILE,
    onChange: (keyRef, from, to, why) =>
      (why === "decrease" ? log.info.bind(log) : log.debug.bind(log))(
        { keyRef, from, to },
        `provider concurrency limit ${why === "decrease" ? "cut" : "raised"}`,
      ),
  });
}
