import {
  ConfigError,
  commonEnv,
  envBool,
  envInt,
  envJson,
  parseEnv,
  refuseDevSecret,
  regionsOf,
} from "@pipeline/shared/config";
import { KEY_NAME } from "@pipeline/shared/kv";
import { TaskType } from "@pipeline/shared/schemas";
import { WebhookGenerations } from "@pipeline/shared/webhooks";
import { z } from "zod";

/** Dollars per solve by task type (PROVIDER_PRICES). */
const TaskPrices = z.partialRecord(TaskType, z.number().min(0).max(1000));

/**
 * A further provider account beside PROVIDER_URL/PROVIDER_KEY (PROVIDERS): another
 * 2Captcha-compatible service, or another plan. Its key is read from the environment variable it
 * names (a reference, never the key itself in this JSON).
 */
export const ProviderAccountEnv = z.strictObject({
  id: z
    .string()
    .regex(/^[a-z0-9_-]{1,32}$/, "1-32 lower-case letters, digits, '_' and '-'")
    .refine((id) => id !== "default", "'default' is PROVIDER_URL's account"),
  url: z.url(),
  keyEnv: z.string().regex(/^[A-Z][A-Z0-9_]*$/, "the name of the environment variable holding the key"),
  /** Its thread plan; absent: paid per solve, no plan (only the solvers' own limits). */
  threads: z.number().int().min(1).max(100_000).optional(),
  /** Dollars per solve by task type: what routing compares (absent types: the list prices). */
  prices: TaskPrices.optional(),
  /** Among accounts of one price, the lower first. PROVIDER_URL's account is 0. */
  priority: z.number().int().min(0).max(100).default(1),
  /** Dollars: below this balance it takes tasks only when no other account can (default PROVIDER_BALANCE_FLOOR). */
  balanceFloor: z.number().min(0).max(1_000_000).optional(),
});
export type ProviderAccountEnv = z.infer<typeof ProviderAccountEnv>;

/** A further account with its key read from the environment. */
export interface ProviderAccountConfig extends ProviderAccountEnv {
  key: string;
}

export const SolverEnv = z
  .object({
    ...commonEnv,
    SOLVER_VERSION: z
      .string()
      .regex(/^[a-z0-9_]+$/, "lower-case letters, digits and '_'")
      .default("v1"),
    /**
     * The solver's stable name; each process start adds an incarnation (`<name>.<incarnation>`).
     * At most 40 characters, so the id with its incarnation fits a Postgres application_name.
     */
    WORKER_ID: z
      .string()
      .min(1)
      .max(40)
      .regex(/^[A-Za-z0-9_.-]+$/, "letters, digits, '_', '.' and '-'")
      .optional(),
    PROVIDER_URL: z.url().default("http://127.0.0.1:18090"),
    /** The provider key when there is one; its name (for the config bucket) is PROVIDER_KEY_NAME. */
    PROVIDER_KEY: z.string().min(1).optional(),
    PROVIDER_KEY_NAME: z.string().regex(KEY_NAME, "letters, digits, '_' and '-'").default("default"),
    /** JSON `{ "<name>": "<key>" }`, re-read at each config change: the keys `rotate-key` may switch to. */
    PROVIDER_KEYS_FILE: z.string().min(1).optional(),
    PROVIDER_PROFILE: z.enum(["2captcha", "captchaai"]).default("captchaai"),
    PROVIDER_TIMEOUT_MS: envInt(15_000, 100, 120_000),
    /** Provider HTTP requests in flight at once per process; more wait their turn. */
    PROVIDER_MAX_CONNECTIONS: envInt(64, 1, 10_000),
    SOLVER_CONCURRENCY: envInt(200, 1, 20_000),
    SOLVER_FETCH_BATCH: envInt(64, 1, 1000),
    /** Tasks in their start phase (slot, claim, submit, checkpoint) at once; the rest wait their turn. */
    SOLVER_START_CONCURRENCY: envInt(64, 1, 20_000),
    ACK_WAIT_MS: envInt(30_000, 1000, 600_000),
    LEASE_MS: envInt(30_000, 1000, 600_000),
    /** A solver whose heartbeat is this old while it holds leases is dead: its leases and slots are released (0: never). */
    DEAD_AFTER_MS: envInt(6000, 0, 600_000),
    /** How often each solver looks for dead ones. */
    REAP_INTERVAL_MS: envInt(2000, 200, 600_000),
    /** Overrides every type's first-poll delay (tests use small values); unset = per-type defaults. */
    FIRST_POLL_MS: z.coerce.number().int().min(0).max(300_000).optional(),
    POLL_INTERVAL_MS: envInt(5000, 10, 60_000),
    MAX_POLLS: envInt(20, 1, 20),
    /** Fold concurrent polls into `res.php?action=get&ids=` requests (up to 100 ids). Off for providers without bulk get. */
    BULK_POLL: envBool(true),
    /** Read each solved task's price with `res.php?action=get2` (the ledger's charge); off: the configured price, flagged as an estimate. */
    PROVIDER_PRICE_READ: envBool(true),
    /** JSON dollars per solve by task type: the ledger's estimate where the provider says no price (default: 2Captcha's list prices). */
    PROVIDER_PRICES: envJson(TaskPrices),
    /** JSON list of further provider accounts (ProviderAccountEnv): tasks go to the cheapest usable one (docs/providers.md). */
    PROVIDERS: envJson(
      z
        .array(ProviderAccountEnv)
        .max(8)
        .refine((a) => new Set(a.map((x) => x.id)).size === a.length, "account ids must be unique"),
    ),
    /** Dollars: an account whose newest balance sample is below it takes tasks only when no other can (0: no floor). */
    PROVIDER_BALANCE_FLOOR: z.coerce.number().min(0).max(1_000_000).default(1),
    /** How often a solver looks for clients' reports to forward to the provider. */
    REPORT_POLL_MS: envInt(1000, 10, 60_000),
    /** How often the fleet samples the provider's balance (getbalance), per region; 0: never. */
    BALANCE_POLL_MS: envInt(60_000, 0, 24 * 3600_000),
    /** A report the provider does not answer (transport, key errors) is given up after this many calls. */
    REPORT_MAX_ATTEMPTS: envInt(20, 1, 1000),
    MAX_RESUBMITS: envInt(3, 0, 20),
    TOKEN_TTL_MS: envInt(120_000, 1000, 24 * 3600_000),
    RETRY_BASE_MS: envInt(1000, 10, 600_000),
    RETRY_MAX_MS: envInt(60_000, 10, 3600_000),
    DRAIN_TIMEOUT_MS: envInt(25_000, 0, 600_000),
    /** The plan's concurrent threads for PROVIDER_KEY, enforced across every solver process. */
    PROVIDER_THREADS: envInt(50, 1, 100_000),
    SLOT_WAIT_MS: envInt(2000, 0, 60_000),
    /**
     * Adapt how many provider tasks this solver keeps at each account (AIMD, under the plan):
     * cut on ERROR_NO_SLOT_AVAILABLE, 429 and submit timeouts, grown back one by one (docs/providers.md).
     */
    ADAPTIVE_CONCURRENCY: envBool(false),
    /** A solver's block of provider units is leased this long (renewed every quarter): a dead solver's reservations end after it, or sooner by the reaper. */
    SLOT_LEASE_MS: envInt(6000, 1000, 600_000),
    /** Claims of one task before it is dead-lettered. */
    MAX_ATTEMPTS: envInt(10, 1, 1000),
    /** Share of SOLVER_CONCURRENCY that only the high lane may use. */
    HIGH_LANE_RESERVED: z.coerce.number().min(0).max(0.9).default(0.1),
    /** Signs task callbacks (HMAC-SHA256); without it callbacks are not sent. */
    WEBHOOK_SECRET: z.string().min(16, "at least 16 characters").optional(),
    /** The master secret before a rotation: callbacks carry a signature for each until it is removed. */
    WEBHOOK_SECRET_PREVIOUS: z.string().min(16, "at least 16 characters").optional(),
    /** Per client id, the generation of its callback secret (the gateway's setting, the same value): one client's secret rotated alone. */
    WEBHOOK_CLIENT_GENERATIONS: envJson(WebhookGenerations),
    WEBHOOK_TIMEOUT_MS: envInt(5000, 100, 60_000),
    WEBHOOK_RETRY_BASE_MS: envInt(1000, 10, 600_000),
    WEBHOOK_RETRY_MAX_MS: envInt(300_000, 10, 3600_000),
    /** Callback URLs may use http: as well as https: (dev stacks and tests). */
    WEBHOOK_ALLOW_HTTP: envBool(false),
    /** Callbacks may go to loopback, RFC 1918, CGNAT and ULA addresses (dev stacks and tests only). */
    WEBHOOK_ALLOW_PRIVATE: envBool(false),
    /** Callback attempts in flight in this process. */
    WEBHOOK_CONCURRENCY: envInt(50, 1, 10_000),
    /** Callback attempts in flight per task owner (API key), across every solver. */
    WEBHOOK_TENANT_MAX_IN_FLIGHT: envInt(10, 1, 10_000),
    /** Callback attempts in flight per receiving host (`host[:port]`), across every solver. */
    WEBHOOK_HOST_MAX_IN_FLIGHT: envInt(20, 1, 10_000),
    /** A callback is given up (`failed`) after this many attempts... */
    WEBHOOK_MAX_ATTEMPTS: envInt(30, 1, 1000),
    /** ...or once its final state is this old, whichever comes first. */
    WEBHOOK_MAX_AGE_MS: envInt(24 * 3600_000, 1000, 30 * 24 * 3600_000),
    /** How often an idle solver looks for due callbacks (retries scheduled by other solvers). */
    WEBHOOK_POLL_MS: envInt(1000, 10, 60_000),
    BREAKER_FAILURE_RATE: z.coerce.number().gt(0).max(1).default(0.5),
    BREAKER_MIN_CALLS: envInt(10, 1, 10_000),
    BREAKER_WINDOW_MS: envInt(30_000, 100, 3600_000),
    BREAKER_COOLDOWN_MS: envInt(5000, 10, 3600_000),
    BREAKER_MAX_COOLDOWN_MS: envInt(60_000, 10, 3600_000),
    DB_POOL_MAX: envInt(20, 1, 500),
    /**
     * Runs a full garbage collection (and returns the allocator's free pages) whenever the
     * resident set has grown by this many MB since the last one; 0 leaves it to the runtime.
     */
    GC_GROWTH_MB: envInt(16, 0, 4096),
    /**
     * Above this resident set (MB) the governor collects after every GC_GROWTH_ABOVE_LIMIT_MB
     * instead: a soft limit that holds bursts down where it matters (thousands of tasks in
     * flight) without paying for it below (steady throughput). 0: no soft limit.
     */
    GC_SOFT_LIMIT_MB: envInt(112, 0, 65_536),
    /** The soft limit applies with at least this many tasks in flight in the process (below, the growth rule bounds the garbage). */
    GC_SOFT_LIMIT_MIN_IN_FLIGHT: envInt(2000, 0, 10_000_000),
    GC_GROWTH_ABOVE_LIMIT_MB: envInt(1, 1, 4096),
    /** Above the soft limit, the most of the time (percent) those collections may take. */
    GC_MAX_CPU_PERCENT: envInt(50, 1, 100),
    METRICS_HOST: z.string().default("127.0.0.1"),
    /** Prometheus `/metrics` of this process; 0 picks a free port (several solvers on one host). */
    METRICS_PORT: envInt(9464, 0, 65535),
  })
  .refine((c) => c.PROVIDER_KEY !== undefined || c.PROVIDER_KEYS_FILE !== undefined, {
    path: ["PROVIDER_KEY"],
    message: "the provider API key is required (PROVIDER_KEY or PROVIDER_KEYS_FILE)",
  })
  .refine((c) => c.RETRY_BASE_MS <= c.RETRY_MAX_MS, {
    path: ["RETRY_BASE_MS"],
    message: "must not exceed RETRY_MAX_MS",
  })
  .refine((c) => c.WEBHOOK_RETRY_BASE_MS <= c.WEBHOOK_RETRY_MAX_MS, {
    path: ["WEBHOOK_RETRY_BASE_MS"],
    message: "must not exceed WEBHOOK_RETRY_MAX_MS",
  })
  .refine((c) => c.BREAKER_COOLDOWN_MS <= c.BREAKER_MAX_COOLDOWN_MS, {
    path: ["BREAKER_COOLDOWN_MS"],
    message: "must not exceed BREAKER_MAX_COOLDOWN_MS",
  })
  .superRefine((c, ctx) => {
    refuseDevSecret(c.PIPELINE_ENV, "WEBHOOK_SECRET", c.WEBHOOK_SECRET, ctx);
    refuseDevSecret(c.PIPELINE_ENV, "WEBHOOK_SECRET_PREVIOUS", c.WEBHOOK_SECRET_PREVIOUS, ctx);
  });
export type SolverConfig = z.infer<typeof SolverEnv> & { regions: string[]; accounts: ProviderAccountConfig[] };

/** Parses the solver's environment; throws a ConfigError naming each variable at fault. */
export function loadConfig(env: Record<string, string | undefined>): SolverConfig {
  const c = parseEnv(SolverEnv, env);
  return { ...c, regions: regionsOf(c), accounts: accountKeys(c.PROVIDERS ?? [], env) };
}

/** Each further account's key, from the variable it names; a ConfigError naming the field otherwise. */
function accountKeys(accounts: ProviderAccountEnv[], env: Record<string, string | undefined>): ProviderAccountConfig[] {
  return accounts.map((a, i) => {
    const key = env[a.keyEnv];
    if (!key)
      throw new ConfigError(
        `invalid configuration:\n  PROVIDERS[${i}].keyEnv: ${a.keyEnv} is not set (account ${a.id}'s provider key)`,
        [`PROVIDERS[${i}].keyEnv`],
      );
    return { ...a, key };
  });
}
