import { MIN_PEPPER_LENGTH, PEPPERED_CLIENT_ID, UNPEPPERED_CLIENT_ID } from "@pipeline/shared/client-ids";
import {
  commonEnv,
  envBool,
  envInt,
  envJson,
  envList,
  parseEnv,
  refuseDevSecret,
  regionsOf,
} from "@pipeline/shared/config";
import { type Cidr, parseCidr } from "@pipeline/shared/net";
import { DEFAULT_IMAGE_MAX_BYTES } from "@pipeline/shared/schemas";
import { WebhookGenerations } from "@pipeline/shared/webhooks";
import { z } from "zod";
import { QuotasConfig, TaskPrices } from "./domain/quotas.ts";

/** Shortest API key accepted outside dev stacks and tests (API_KEYS_ALLOW_SHORT). */
export const MIN_API_KEY_LENGTH = 32;

const GatewayEnvFields = z.object({
  GATEWAY_HOST: z.string().default("127.0.0.1"),
  GATEWAY_PORT: envInt(8080, 0, 65535),
  ...commonEnv,
  /** Client API keys, comma-separated: each at least 32 characters (a key is a bearer secret), unless API_KEYS_ALLOW_SHORT. */
  API_KEYS: envList().pipe(
    z.array(z.string().min(4, "each key needs at least 4 characters")).min(1, "at least one key"),
  ),
  /** Dev stacks and tests only: keys of 4 to 31 characters are accepted (`dev-key`). */
  API_KEYS_ALLOW_SHORT: envBool(false),
  /** Secret (at least 32 characters): a key's client id is HMAC-SHA256(pepper, key) (32 hex characters); unset (dev only): the sha256 prefix (16). docs/security.md. */
  API_KEY_PEPPER: z.string().min(MIN_PEPPER_LENGTH, `at least ${MIN_PEPPER_LENGTH} characters`).optional(),
  /** Removed (a key has one client id; no deployment ever ran unpeppered): refused when set. */
  API_KEY_LEGACY_IDS: z.string().optional(),
  /** Failed authentications of one key (by its fingerprint) from one source address within AUTH_FAIL_WINDOW_MS before that key gets 429 there. */
  AUTH_FAIL_MAX: envInt(20, 1, 1_000_000),
  /** Failed authentications from one source address, whatever the keys, within the window before the whole address gets 429 (a key guesser). */
  AUTH_FAIL_MAX_PER_SOURCE: envInt(200, 1, 10_000_000),
  AUTH_FAIL_WINDOW_MS: envInt(60_000, 1000, 24 * 3600_000),
  /** The gateway runs behind a load balancer: outside dev it then refuses to start without GATEWAY_TRUSTED_PROXIES. */
  GATEWAY_BEHIND_PROXY: envBool(false),
  /** The load balancers' addresses or ranges (`10.0.1.5,10.0.1.0/24`): only a request from one of them has its X-Forwarded-For believed. */
  GATEWAY_TRUSTED_PROXIES: envList()
    .pipe(
      z.array(z.string()).transform((items, ctx) => {
        const out: Cidr[] = [];
        for (const [i, item] of items.entries()) {
          const c = parseCidr(item);
          if (c) out.push(c);
          else
            ctx.addIssue({
              code: "custom",
              path: [i],
              message: `"${item}" is not an address or a range (10.0.1.5, 10.0.1.0/24, fd00::/8)`,
            });
        }
        return out;
      }),
    )
    .default([]),
  /** Replaced by GATEWAY_BEHIND_PROXY + GATEWAY_TRUSTED_PROXIES (it believed any peer's X-Forwarded-For): refused when set. */
  GATEWAY_TRUST_PROXY: z.string().optional(),
  /** Per API key quotas (docs/security.md, "Quotas"): `{"default": {…}, "keys": {"<client id>": {…}}}`; unset: no limits. */
  QUOTAS: envJson(QuotasConfig),
  /** Provider money per solve, by task type (`{"turnstile": 0.0015, …}`): what a dailySpend quota counts. */
  TASK_PRICES: envJson(TaskPrices),
  /** How often the in-flight and spend figures of the quotas are re-read from Postgres. */
  QUOTA_REFRESH_MS: envInt(2000, 100, 600_000),
  /** The listener of `/metrics` (and `/readyz`, `/healthz`), apart from the clients' one; unset: no metrics listener, 0: a free port (logged). */
  GATEWAY_METRICS_HOST: z.string().default("127.0.0.1"),
  GATEWAY_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  MAX_BODY_BYTES: envInt(256 * 1024, 1024, 16 * 1024 * 1024),
  IMAGE_MAX_BYTES: envInt(DEFAULT_IMAGE_MAX_BYTES, 1024, 8 * 1024 * 1024),
  MAX_WAIT_SECONDS: envInt(60, 0, 300),
  /** Long-polls (`?wait=`) and event streams open at once per API key, and in all (429 beyond). */
  LONG_POLL_MAX_PER_KEY: envInt(2000, 1, 100_000),
  LONG_POLL_MAX_TOTAL: envInt(20_000, 1, 1_000_000),
  /** A waiting request re-reads its task on each of its events, and at least this often (a missed event; another region's task: 1 s). */
  LONG_POLL_RECHECK_MS: envInt(5000, 100, 60_000),
  /** An event stream (`/v1/tasks/:id/events`) is closed after this long; EventSource reconnects. */
  SSE_MAX_SECONDS: envInt(300, 1, 24 * 3600),
  PUBLISH_DEADLINE_MS: envInt(10_000, 100, 120_000),
  /** A task not finished this long after acceptance (or a redrive) is dead-lettered. */
  TASK_DEADLINE_MS: envInt(600_000, 1000, 7 * 24 * 3600_000),
  /** How far ahead a task's `notBefore` / `needBy` may be (docs/scheduling.md). */
  SCHEDULE_MAX_AHEAD_MS: envInt(24 * 3600_000, 60_000, 7 * 24 * 3600_000),
  /** A `needBy` task starts at needBy minus (the type's measured p90 solve time + this margin). */
  SCHEDULE_MARGIN_MS: envInt(5000, 0, 600_000),
  /** The solve time assumed for a type with too few completed tasks in the last SCHEDULE_SOLVE_WINDOW_MS. */
  SCHEDULE_DEFAULT_SOLVE_MS: envInt(60_000, 1000, 3600_000),
  /** The window of completed tasks the p90 solve time is measured over (re-read every 30 s at most). */
  SCHEDULE_SOLVE_WINDOW_MS: envInt(15 * 60_000, 60_000, 24 * 3600_000),
  /** How often the warm pools' keeper looks at each pool (docs/warm-pools.md). */
  POOL_TICK_MS: envInt(1000, 100, 60_000),
  /** The most live warm pools one client id may have; one more is a 409. */
  POOL_MAX_PER_CLIENT: envInt(20, 1, 1000),
  DB_POOL_MAX: envInt(20, 1, 500),
  /** Reports (`reportbad`/`reportgood`, `POST /v1/tasks/:id/report`) are taken this long after a task completed: the provider's window. */
  REPORT_WINDOW_MS: envInt(15 * 60_000, 1000, 24 * 3600_000),
  /** The master of the clients' callback signing secrets (the solvers' WEBHOOK_SECRET): GET /v1/webhook-secret hands each client its own. */
  WEBHOOK_SECRET: z.string().min(16, "at least 16 characters").optional(),
  /** The master before a rotation (the solvers sign with both until it is removed). */
  WEBHOOK_SECRET_PREVIOUS: z.string().min(16, "at least 16 characters").optional(),
  /** Per client id, the generation of its callback secret (`{"<client id>": {"current": 2, "previous": 1}}`): one client's secret rotated alone. */
  WEBHOOK_CLIENT_GENERATIONS: envJson(WebhookGenerations),
  /** A task's callbackUrl may use http: as well as https: (dev stacks and tests). */
  WEBHOOK_ALLOW_HTTP: envBool(false),
  /** A task's callbackUrl may point to loopback, RFC 1918, CGNAT and ULA addresses (dev stacks and tests only). */
  WEBHOOK_ALLOW_PRIVATE: envBool(false),
});
export const GatewayEnv = GatewayEnvFields.superRefine(
  (c, ctx) => {
    const spendCapped =
      c.QUOTAS && [c.QUOTAS.default, ...Object.values(c.QUOTAS.keys)].some((q) => q.dailySpend !== undefined);
    if (spendCapped && (!c.TASK_PRICES || Object.keys(c.TASK_PRICES).length === 0))
      ctx.addIssue({
        code: "custom",
        path: ["TASK_PRICES"],
        message: "required when a quota sets dailySpend (the price of each task type, in provider money)",
      });
    if (c.GATEWAY_TRUST_PROXY !== undefined)
      ctx.addIssue({
        code: "custom",
        path: ["GATEWAY_TRUST_PROXY"],
        message:
          "replaced: set GATEWAY_BEHIND_PROXY=1 and GATEWAY_TRUSTED_PROXIES=<the load balancer's private address or range> (only its X-Forwarded-For is believed)",
      });
    if (c.PIPELINE_ENV !== "dev") {
      if (c.GATEWAY_BEHIND_PROXY && c.GATEWAY_TRUSTED_PROXIES.length === 0)
        ctx.addIssue({
          code: "custom",
          path: ["GATEWAY_TRUSTED_PROXIES"],
          message:
            "required with GATEWAY_BEHIND_PROXY: the load balancer's private address or range (otherwise every client has its address, and one client's failed logins throttle them all)",
        });
      if (!c.API_KEY_PEPPER)
        ctx.addIssue({
          code: "custom",
          path: ["API_KEY_PEPPER"],
          message:
            "required outside dev (PIPELINE_ENV=dev): a generated secret of 32+ characters (openssl rand -hex 32)",
        });
    }
    refuseDevSecret(c.PIPELINE_ENV, "WEBHOOK_SECRET", c.WEBHOOK_SECRET, ctx);
    refuseDevSecret(c.PIPELINE_ENV, "WEBHOOK_SECRET_PREVIOUS", c.WEBHOOK_SECRET_PREVIOUS, ctx);
    if (c.API_KEY_LEGACY_IDS !== undefined)
      ctx.addIssue({
        code: "custom",
        path: ["API_KEY_LEGACY_IDS"],
        message:
          "removed: a key has one client id (peppered by API_KEY_PEPPER), no older id is accepted any more; unset it",
      });
    // A QUOTAS entry under an id no key has would silently lift that key's limits.
    const idFormat = c.API_KEY_PEPPER ? PEPPERED_CLIENT_ID : UNPEPPERED_CLIENT_ID;
    for (const id of Object.keys(c.QUOTAS?.keys ?? {}))
      if (!idFormat.test(id))
        ctx.addIssue({
          code: "custom",
          path: ["QUOTAS", "keys", id],
          message: c.API_KEY_PEPPER
            ? "an unpeppered client id: with API_KEY_PEPPER keys are named by their peppered id (32 hex characters, GET /v1/usage)"
            : "a peppered client id, but API_KEY_PEPPER is not set",
        });
    if (c.API_KEYS_ALLOW_SHORT) return;
    // Which key is short is told by its position, never by its value.
    c.API_KEYS.forEach((k, i) => {
      if (k.length < MIN_API_KEY_LENGTH)
        ctx.addIssue({
          code: "custom",
          path: ["API_KEYS"],
          message: `key #${i + 1} has ${k.length} characters: at least ${MIN_API_KEY_LENGTH} are required (API_KEYS_ALLOW_SHORT=1 for dev stacks and tests only)`,
        });
    });
  },
  // Also when another variable is at fault, so that one start names every problem.
  {
    when: (p) =>
      !p.issues.some((i) =>
        [
          "API_KEYS",
          "API_KEYS_ALLOW_SHORT",
          "QUOTAS",
          "TASK_PRICES",
          "PIPELINE_ENV",
          "GATEWAY_BEHIND_PROXY",
          "GATEWAY_TRUSTED_PROXIES",
          "API_KEY_PEPPER",
          "WEBHOOK_SECRET",
          "WEBHOOK_SECRET_PREVIOUS",
        ].includes(String(i.path?.[0])),
      ),
  },
);
export type GatewayConfig = z.infer<typeof GatewayEnv> & { regions: string[] };

/** Parses the gateway's environment; throws a ConfigError naming each variable at fault. */
export function loadConfig(env: Record<string, string | undefined>): GatewayConfig {
  const c = parseEnv(GatewayEnv, env);
  return { ...c, regions: regionsOf(c) };
}
