import { join, resolve } from "node:path";
import {
  ConfigError,
  commonEnv,
  envInt,
  envList,
  isCompiledBinary,
  natsAuthEnv,
  parseEnv,
  regionsOf,
} from "@pipeline/shared/config";
import { bodiesMaxAgeFor } from "@pipeline/shared/nats";
import { notifyEnv } from "@pipeline/shared/notify";
import { DEFAULT_LEASE_RENEW_MS, DEFAULT_LEASE_TIMING } from "@pipeline/shared/regions";
import { z } from "zod";

/** The repository's `.data/` when run from a clone; the state directory of the unit when compiled (infra/deploy). */
const defaultDataDir = isCompiledBinary()
  ? "/var/lib/captcha-pipeline"
  : join(resolve(import.meta.dir, "..", "..", ".."), ".data");

/** A host name or an IP address (IPv6 with or without brackets), as the Host header names it without its port. */
const HOST_NAME = /^(\[[0-9a-fA-F:.]+\]|[0-9a-fA-F:.]*:[0-9a-fA-F:.]*|[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)$/;

const PostgresUrl = z.string().regex(/^postgres(ql)?:\/\//, "must be a postgres:// URL");

export const RecoveryEnv = z
  .object({
    NATS_URL: commonEnv.NATS_URL,
    /** Required by every command that reads the live database (all but `restore`). */
    DATABASE_URL: PostgresUrl.optional(),
    /** `restore`'s target when `--into` is not given (keeps its password out of the process list). */
    RESTORE_INTO_URL: PostgresUrl.optional(),
    REGION: commonEnv.REGION,
    REGIONS: commonEnv.REGIONS,
    STREAM_REPLICAS: commonEnv.STREAM_REPLICAS,
    ...natsAuthEnv,
    DATA_DIR: z.string().default(defaultDataDir),
    /** Where snapshots live; default `<DATA_DIR>/snapshots`. */
    SNAPSHOT_DIR: z.string().optional(),
    SNAPSHOT_KEEP: envInt(12, 1, 10_000),
    /** Scheduled snapshots of the service; 0 turns them off. */
    SNAPSHOT_INTERVAL_MS: envInt(300_000, 0, 7 * 24 * 3600_000),
    /** `assess` fails when the newest snapshot is older than this. */
    SNAPSHOT_MAX_AGE_MS: envInt(900_000, 1000, 30 * 24 * 3600_000),
    /**
     * How long BODIES (image bodies, kept out of EVENTS) holds a body, here and in the other
     * region's mirror. Default: the longer of SNAPSHOT_INTERVAL_MS and SNAPSHOT_MAX_AGE_MS, plus 6 h.
     */
    BODIES_MAX_AGE_MS: z.coerce
      .number()
      .int()
      .min(60_000)
      .max(30 * 24 * 3600_000)
      .optional(),
    /** Stale sweep period of the service; 0 turns it off. */
    SWEEP_INTERVAL_MS: envInt(30_000, 0, 24 * 3600_000),
    /** A queued/retrying row not updated for this long, with no message in TASKS, is re-published. */
    STALE_AFTER_MS: envInt(60_000, 1000, 7 * 24 * 3600_000),
    /** How long the gateway may still be publishing a fresh row (its PUBLISH_DEADLINE_MS plus margin). */
    GATEWAY_PUBLISH_GRACE_MS: envInt(15_000, 0, 600_000),
    PUBLISH_DEADLINE_MS: envInt(10_000, 100, 600_000),
    PROVIDER_URL: z.url().default("http://127.0.0.1:18090"),
    /** Only `assess` uses it (getbalance); never printed. */
    PROVIDER_KEY: z.string().min(1).optional(),
    PROVIDER_TIMEOUT_MS: envInt(5000, 100, 60_000),
    DB_POOL_MAX: envInt(5, 1, 100),
    /** Drills send their steady load through this gateway... */
    GATEWAY_URL: z.url().default("http://127.0.0.1:8080"),
    /** ...with this client API key (one of the gateway's API_KEYS). */
    DRILL_API_KEY: z.string().min(1).optional(),
    DRILL_RATE: z.coerce.number().min(0.5).max(1000).default(10),
    /** With several REGIONS: the witness NATS holding the region leases (docs/regions.md), and its user. */
    WITNESS_URL: z.string().min(1).optional(),
    WITNESS_USER: z.string().min(1).optional(),
    WITNESS_PASSWORD: z.string().min(1).optional(),
    WITNESS_CREDS: z.string().min(1).optional(),
    /** Replicas of the witness's `leases` bucket: 3 on a 3-node witness (infra/deploy), so losing one node fences no region. */
    WITNESS_REPLICAS: envInt(1, 1, 5),
    /**
     * A region that has not renewed its lease for this long may be taken over (plus the margin).
     * Default 20 s: TTL − margin (17 s, when a silent region's solvers stop) is 1.6 × the longest a
     * keeper can go without renewing while the 3-node witness elects a new leader (10.25 s: a
     * renew interval, nats-server's 9 s maximum election timeout, a 250 ms retry; at most 9.2 s
     * measured), so losing the witness's leading node fences no region. A lost region is taken
     * over TTL + margin (23 s) after its last renewal. docs/regions.md, "The witness's timings".
     */
    LEASE_TTL_MS: envInt(DEFAULT_LEASE_TIMING.ttlMs, 1000, 600_000),
    /** Solvers stop submitting this long before the TTL; a takeover waits this long after it. */
    LEASE_MARGIN_MS: envInt(DEFAULT_LEASE_TIMING.marginMs, 100, 60_000),
    /** How often the keeper renews (a failed round is retried after 250 ms); part of the bound above. */
    LEASE_RENEW_MS: envInt(DEFAULT_LEASE_RENEW_MS, 100, 60_000),
    /** After a takeover, tasks whose provider id never reached this region are adopted this much later. */
    ADOPT_UNCERTAIN_MS: envInt(30_000, 0, 3600_000),
    /**
     * A lost region's share of a provider account's plan is counted this long after its lease was
     * taken over (its last provider tasks, whose ids never reached this region, end meanwhile).
     */
    PLAN_RELEASE_MS: envInt(15_000, 0, 3600_000),
    /** A submit marker this recent counts as a provider task in the region's share (>= the solvers' PROVIDER_TIMEOUT_MS + 5 s). */
    PLAN_MARKER_MS: envInt(125_000, 1000, 3600_000),
    /** `assess` and the console warn when a provider balance lasts fewer hours at the last hour's spend (docs/money.md). */
    BALANCE_HOURS_WARN: envInt(6, 1, 24 * 365),
    /** `reconcile`: a difference between the ledger and the balance delta beyond this many micro-dollars is reported (1 cent). */
    RECONCILE_TOLERANCE_MICROS: envInt(10_000, 0, 1_000_000_000),
    /** The service reconciles the last RECONCILE_HOURS this often (daily); 0 turns it off. */
    RECONCILE_INTERVAL_MS: envInt(24 * 3600_000, 0, 7 * 24 * 3600_000),
    /** The operators' webhook and the console's address its messages link to (docs/notifications.md). */
    ...notifyEnv,
    /** A provider account's breaker open this long is a breaker storm: an incident, and a notification. */
    BREAKER_STORM_MS: envInt(60_000, 1000, 3600_000),
    /** This many new dead letters within NOTIFY_DLQ_WINDOW_MS send a message. */
    NOTIFY_DLQ_GROWTH: envInt(50, 1, 1_000_000),
    NOTIFY_DLQ_WINDOW_MS: envInt(600_000, 10_000, 24 * 3600_000),
    RECONCILE_HOURS: envInt(24, 1, 24 * 90),
    /** Retention job of the service (issue 16.3, docs/security.md); 0 turns it off. */
    RETENTION_INTERVAL_MS: envInt(3600_000, 0, 7 * 24 * 3600_000),
    /** A completed task's token is erased from its row this long after it expired. */
    TOKEN_GRACE_MS: envInt(3600_000, 0, 30 * 24 * 3600_000),
    /** Params (images included), callback URLs and answers without expiry of finished tasks: erased after this many days. */
    TASK_RETENTION_DAYS: envInt(7, 1, 3650),
    /** Finished rows (and their webhook_deliveries) deleted after this many days. */
    ROW_RETENTION_DAYS: envInt(30, 1, 3650),
    /** Rows per retention statement: small enough that no statement holds locks for long. */
    RETENTION_BATCH: envInt(1000, 1, 100_000),
    /** The service's Prometheus `/metrics` (retention, off-host copies); unset = no listener, 0 = a free port. */
    /** Its own names: under `npm run dev` every app sees one environment, where METRICS_PORT is the solver's. */
    RECOVERY_METRICS_HOST: z.string().min(1).default("127.0.0.1"),
    RECOVERY_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
    /**
     * Off-host snapshot copies (issue 16.4): the JetStream domain (another region) whose Object
     * Store receives a verified copy of each snapshot. Default: the first other region of REGIONS;
     * `none` turns copies off.
     */
    SNAPSHOT_OFFHOST: z
      .string()
      .regex(/^[A-Za-z0-9_-]+$/, "a JetStream domain (a region name) or none")
      .optional(),
    /** Copies kept in the off-host bucket (default SNAPSHOT_KEEP). */
    SNAPSHOT_OFFHOST_KEEP: z.coerce.number().int().min(1).max(10_000).optional(),
    /** The operator console (src/console): its own listener, never the public one. */
    CONSOLE_HOST: z.string().min(1).default("127.0.0.1"),
    CONSOLE_PORT: envInt(8090, 0, 65535),
    /** `name:role:token` entries (roles viewer, operator), comma- or newline-separated; no entry = console off. */
    CONSOLE_TOKENS: z.string().optional(),
    /** The same entries in a file, one a line (npm run dev writes one, 0600). */
    CONSOLE_TOKENS_FILE: z.string().min(1).optional(),
    /**
     * The names the console answers to (the Host header, port aside), comma-separated; any other
     * gets 421 (DNS rebinding). Always: localhost, 127.0.0.1, ::1, and CONSOLE_HOST unless a wildcard.
     */
    CONSOLE_HOST_NAMES: envList()
      .pipe(z.array(z.string().regex(HOST_NAME, "host names or IP addresses, comma-separated (no port, no scheme)")))
      .optional(),
    /** `auto`: the session cookie is Secure unless CONSOLE_HOST is a loopback address; `always`: behind TLS on loopback too. */
    CONSOLE_COOKIE_SECURE: z.enum(["auto", "always"]).default("auto"),
    /** Failed token sign-ins (form or Bearer) from one address within CONSOLE_SIGNIN_WINDOW_MS before it gets 429. */
    CONSOLE_SIGNIN_MAX_FAILURES: envInt(10, 1, 10_000),
    CONSOLE_SIGNIN_WINDOW_MS: envInt(300_000, 1000, 24 * 3600_000),
    /** The most tasks one bulk redrive or cancel acts on (console and CLI; the oldest matching first). */
    CONSOLE_BULK_MAX: envInt(1000, 1, 100_000),
    /** A redriven task's fresh deadline (the gateway's TASK_DEADLINE_MS). */
    TASK_DEADLINE_MS: envInt(600_000, 1000, 7 * 24 * 3600_000),
  })
  .transform((c) => ({ ...c, SNAPSHOT_DIR: resolve(c.SNAPSHOT_DIR ?? join(c.DATA_DIR, "snapshots")) }));
export type RecoveryConfig = z.infer<typeof RecoveryEnv> & {
  regions: string[];
  offHostDomain: string | undefined;
  bodiesMaxAgeMs: number;
  consoleHostNames: string[];
};

const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "::1"];
const WILDCARDS = new Set(["0.0.0.0", "::", "[::]"]);

/** A host name as the console compares it: lower case, IPv6 without brackets. */
export const normalHostName = (name: string) =>
  name
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, "$1");

/** The console's host names: the loopback names, CONSOLE_HOST unless a wildcard, and CONSOLE_HOST_NAMES; each once, normalized. */
export function consoleHostNamesOf(c: { CONSOLE_HOST: string; CONSOLE_HOST_NAMES?: string[] | undefined }): string[] {
  const bound = WILDCARDS.has(c.CONSOLE_HOST) ? [] : [c.CONSOLE_HOST];
  return [...new Set([...LOOPBACK_NAMES, ...bound, ...(c.CONSOLE_HOST_NAMES ?? [])].map(normalHostName))];
}

/** Parses the recovery environment; throws a ConfigError naming each variable at fault (never its value). */
export function loadConfig(env: Record<string, string | undefined>): RecoveryConfig {
  const c = parseEnv(RecoveryEnv, env);
  const regions = regionsOf(c);
  if (regions.length > 1 && !c.WITNESS_URL)
    throw new ConfigError(
      "invalid configuration:\n  WITNESS_URL: required with several REGIONS (the region leases live there)",
      ["WITNESS_URL"],
    );
  if (c.LEASE_MARGIN_MS * 2 >= c.LEASE_TTL_MS)
    throw new ConfigError("invalid configuration:\n  LEASE_MARGIN_MS: must be less than half of LEASE_TTL_MS", [
      "LEASE_MARGIN_MS",
    ]);
  if (c.ROW_RETENTION_DAYS < c.TASK_RETENTION_DAYS)
    throw new ConfigError("invalid configuration:\n  ROW_RETENTION_DAYS: must be at least TASK_RETENTION_DAYS", [
      "ROW_RETENTION_DAYS",
    ]);
  const offHostDomain =
    c.SNAPSHOT_OFFHOST === "none" ? undefined : (c.SNAPSHOT_OFFHOST ?? regions.find((r) => r !== c.REGION));
  if (offHostDomain === c.REGION)
    throw new ConfigError(
      "invalid configuration:\n  SNAPSHOT_OFFHOST: must be another region's domain, not this region's",
      ["SNAPSHOT_OFFHOST"],
    );
  // A body must outlive the newest snapshot a restore may start from (docs/security.md, "Image bodies").
  const snapshotWindow = Math.max(c.SNAPSHOT_INTERVAL_MS, c.SNAPSHOT_MAX_AGE_MS);
  if (c.BODIES_MAX_AGE_MS !== undefined && c.BODIES_MAX_AGE_MS <= snapshotWindow)
    throw new ConfigError(
      "invalid configuration:\n  BODIES_MAX_AGE_MS: must be longer than SNAPSHOT_INTERVAL_MS and SNAPSHOT_MAX_AGE_MS (a restore replays bodies accepted since the newest snapshot)",
      ["BODIES_MAX_AGE_MS"],
    );
  const bodiesMaxAgeMs =
    c.BODIES_MAX_AGE_MS ??
    bodiesMaxAgeFor({ snapshotIntervalMs: c.SNAPSHOT_INTERVAL_MS, snapshotMaxAgeMs: c.SNAPSHOT_MAX_AGE_MS });
  return { ...c, regions, offHostDomain, bodiesMaxAgeMs, consoleHostNames: consoleHostNamesOf(c) };
}

/** Validates a Postgres URL given on the command line (`--into`). */
export const DatabaseUrl = PostgresUrl;
