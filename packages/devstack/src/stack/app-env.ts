// Every app's settings in a stack of the project's own (dev, tests, bench, drills), written once:
// the one place that says what a gateway, a solver, a recovery service or the rollout service of a
// region is started with. A profile picks the timings: `test` polls fast (drills measure seconds),
// `dev` polls as a person watching would, `bench` logs little.
import type { NatsAuth } from "@pipeline/shared/nats";
import { WEBHOOK_SECRET } from "../testing/processes.ts";

export type StackProfile = "test" | "dev" | "bench";

/** What the apps of one region connect to. */
export interface RegionWiring {
  region: string;
  /** Every region of the stack (REGIONS), this one included. */
  regions: string[];
  nats: { url: string; auth(role: "gateway" | "solver" | "recovery" | "rollout"): NatsAuth };
  /** The owner's (admin's) URL of the region's database, and each app's own login. */
  database: { url: string; appUrls: { gateway: string; solver: string; rollout: string } };
  provider: { url: string; key: string };
  /** The region leases' witness (two-region stacks). */
  witness?: { url: string; user: string; password: string; replicas?: number };
  profile: StackProfile;
  logLevel?: string;
}

const natsLogin = (w: RegionWiring, role: "gateway" | "solver" | "recovery" | "rollout") => {
  const a = w.nats.auth(role);
  return { NATS_USER: a.user!, NATS_PASSWORD: a.pass! };
};

function common(w: RegionWiring): Record<string, string> {
  return {
    NATS_URL: w.nats.url,
    REGION: w.region,
    ...(w.regions.length > 1 ? { REGIONS: w.regions.join(",") } : {}),
    LOG_LEVEL: w.logLevel ?? (w.profile === "bench" ? "warn" : "info"),
    // A stack of the project's own: the published dev secrets and short client keys are accepted.
    PIPELINE_ENV: "dev",
    // The callback secret every stack of the project's own signs with (a dev secret: PIPELINE_ENV=dev).
    WEBHOOK_SECRET,
    // Receivers of tests and dev listen on http://127.0.0.1: the callback SSRF policy is loosened (docs/security.md).
    WEBHOOK_ALLOW_HTTP: "1",
    WEBHOOK_ALLOW_PRIVATE: "1",
  };
}

export function gatewayEnv(
  w: RegionWiring,
  o: { port: number; host?: string; metricsPort?: number; apiKeys: string },
): Record<string, string> {
  return {
    ...common(w),
    DATABASE_URL: w.database.appUrls.gateway,
    ...natsLogin(w, "gateway"),
    GATEWAY_PORT: String(o.port),
    ...(o.host ? { GATEWAY_HOST: o.host } : {}),
    ...(o.metricsPort !== undefined ? { GATEWAY_METRICS_PORT: String(o.metricsPort) } : {}),
    API_KEYS: o.apiKeys,
    API_KEYS_ALLOW_SHORT: "1",
  };
}

const SOLVER_TIMING: Record<StackProfile, Record<string, string>> = {
  test: {
    FIRST_POLL_MS: "50",
    POLL_INTERVAL_MS: "100",
    RETRY_BASE_MS: "100",
    RETRY_MAX_MS: "1000",
    WEBHOOK_RETRY_BASE_MS: "100",
    WEBHOOK_RETRY_MAX_MS: "1000",
  },
  dev: { FIRST_POLL_MS: "1000", POLL_INTERVAL_MS: "1000" },
  // "solver started" is an info line: the bench's readiness signal.
  bench: { LOG_LEVEL: "info", DRAIN_TIMEOUT_MS: "3000" },
};

export function solverEnv(
  w: RegionWiring,
  o: { workerId: string; metricsPort?: number; threads?: number },
): Record<string, string> {
  return {
    ...common(w),
    DATABASE_URL: w.database.appUrls.solver,
    ...natsLogin(w, "solver"),
    WORKER_ID: o.workerId,
    PROVIDER_URL: w.provider.url,
    PROVIDER_KEY: w.provider.key,
    ...(o.threads ? { PROVIDER_THREADS: String(o.threads) } : {}),
    // Each solver serves metrics on a port of its own (0: any; the default 9464 is one per machine).
    METRICS_PORT: String(o.metricsPort ?? 0),
    ...SOLVER_TIMING[w.profile],
  };
}

export interface LeaseTiming {
  ttlMs?: number;
  marginMs?: number;
  renewMs?: number;
  adoptUncertainMs?: number;
}

/** The recovery service: the database's owner, the region's administrator, the lease keeper. */
export function recoveryEnv(
  w: RegionWiring,
  o: { dataDir: string; lease?: LeaseTiming; metricsPort?: number },
): Record<string, string> {
  const fast: Record<string, string> =
    w.profile === "test"
      ? {
          // A short sweep: it must leave the other region's rows alone.
          SNAPSHOT_INTERVAL_MS: "0",
          SWEEP_INTERVAL_MS: "1000",
          STALE_AFTER_MS: "3000",
          GATEWAY_PUBLISH_GRACE_MS: "0",
          LEASE_TTL_MS: String(o.lease?.ttlMs ?? 4000),
          LEASE_MARGIN_MS: String(o.lease?.marginMs ?? 1000),
          LEASE_RENEW_MS: String(o.lease?.renewMs ?? 300),
          ADOPT_UNCERTAIN_MS: String(o.lease?.adoptUncertainMs ?? 20_000),
        }
      : {};
  return {
    ...common(w),
    DATABASE_URL: w.database.url,
    ...natsLogin(w, "recovery"),
    DATA_DIR: o.dataDir,
    ...(o.metricsPort !== undefined ? { RECOVERY_METRICS_PORT: String(o.metricsPort) } : {}),
    ...(w.witness
      ? {
          WITNESS_URL: w.witness.url,
          WITNESS_USER: w.witness.user,
          WITNESS_PASSWORD: w.witness.password,
          ...(w.witness.replicas ? { WITNESS_REPLICAS: String(w.witness.replicas) } : {}),
        }
      : {}),
    ...fast,
  };
}

/** The rollout service of `home`, reaching every other region through suffixed settings (`NATS_URL_HEL1`...). */
export function rolloutEnv(home: RegionWiring, others: RegionWiring[]): Record<string, string> {
  const out: Record<string, string> = {
    ...common(home),
    DATABASE_URL: home.database.appUrls.rollout,
    ...natsLogin(home, "rollout"),
  };
  for (const o of others) {
    const s = o.region.toUpperCase();
    const login = natsLogin(o, "rollout");
    out[`NATS_URL_${s}`] = o.nats.url;
    out[`DATABASE_URL_${s}`] = o.database.appUrls.rollout;
    out[`NATS_USER_${s}`] = login.NATS_USER;
    out[`NATS_PASSWORD_${s}`] = login.NATS_PASSWORD;
  }
  return out;
}
