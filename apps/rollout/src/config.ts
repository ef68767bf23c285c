import {
  ConfigError,
  commonEnv,
  envInt,
  natsAuthEnv,
  parseEnv,
  regionsOf,
  withCredentials,
} from "@pipeline/shared/config";
import { type NatsAuth, natsAuthFromEnv } from "@pipeline/shared/nats";
import { notifyEnv } from "@pipeline/shared/notify";
import { z } from "zod";

export const RolloutEnv = z.object({
  NATS_URL: commonEnv.NATS_URL,
  REGION: commonEnv.REGION,
  REGIONS: commonEnv.REGIONS,
  /** The home region's database: the service reads the gate's task rows there and writes the audit log (the CLI: audit only). */
  DATABASE_URL: commonEnv.DATABASE_URL.optional(),
  ...natsAuthEnv,
  /** AckWait of the lane consumers it reconciles (the solvers' ACK_WAIT_MS). */
  ACK_WAIT_MS: envInt(30_000, 1000, 3_600_000),
  /** How often the service reads the record and the gate. */
  ROLLOUT_TICK_MS: envInt(1000, 100, 60_000),
  /** The status (GET /v1/rollout) and metrics (GET /metrics) listener; unset: none. Operator side, not public. */
  ROLLOUT_HTTP_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  ROLLOUT_HTTP_HOST: z.string().min(1).default("127.0.0.1"),
  /** The operators' webhook (rollbacks, a rollout waiting for a person) and the console it links to (docs/notifications.md). */
  ...notifyEnv,
});
export type RolloutConfig = z.infer<typeof RolloutEnv>;

/** Parses the rollout environment; throws a ConfigError naming each variable at fault (never its value). */
export function loadConfig(env: Record<string, string | undefined>): RolloutConfig {
  return parseEnv(RolloutEnv, env);
}

/** How the rollout reaches one region: its NATS and its database. */
export interface RegionEndpoint {
  name: string;
  natsUrl: string;
  auth: NatsAuth;
  databaseUrl?: string | undefined;
}

const OtherNatsUrl = z
  .string()
  .min(1)
  .refine(
    (u) => !/\/\/[^/@]*@/.test(u),
    "must not carry credentials (use NATS_USER_<REGION>/NATS_PASSWORD_<REGION> or NATS_CREDS_<REGION>)",
  );

/** `fsn1` -> `FSN1`, `eu-central` -> `EU_CENTRAL`: the suffix of another region's variables. */
export const envSuffix = (region: string) => region.toUpperCase().replace(/-/g, "_");

/**
 * Every region the rollout drives (REGIONS, or REGION alone): the home region through NATS_URL,
 * DATABASE_URL and NATS_USER/NATS_PASSWORD/NATS_CREDS, each other one through the same variables
 * suffixed with its name (`NATS_URL_HEL1`, `DATABASE_URL_HEL1`, `NATS_USER_HEL1`...). A missing or
 * malformed one is a ConfigError naming it. Each may come from the environment or as a systemd
 * credential of that name (withCredentials: `DATABASE_PASSWORD_HEL1` goes into `DATABASE_URL_HEL1`).
 */
export function regionEndpoints(
  config: RolloutConfig,
  env: Record<string, string | undefined>,
  o: { needDatabase: boolean },
): RegionEndpoint[] {
  const out: RegionEndpoint[] = [];
  const faults: string[] = [];
  // Another region's passwords come as credentials too (NATS_PASSWORD_HEL1, DATABASE_PASSWORD_HEL1).
  const settings = withCredentials(env);
  for (const name of regionsOf(config)) {
    if (name === config.REGION) {
      if (o.needDatabase && !config.DATABASE_URL) faults.push("DATABASE_URL: required by the rollout service");
      out.push({ name, natsUrl: config.NATS_URL, auth: natsAuthFromEnv(config), databaseUrl: config.DATABASE_URL });
      continue;
    }
    const sfx = envSuffix(name);
    const pick = (k: string) => settings[`${k}_${sfx}`];
    const r = z
      .object({
        NATS_URL: OtherNatsUrl,
        DATABASE_URL: o.needDatabase ? commonEnv.DATABASE_URL : commonEnv.DATABASE_URL.optional(),
        ...natsAuthEnv,
      })
      .safeParse({
        NATS_URL: pick("NATS_URL"),
        DATABASE_URL: pick("DATABASE_URL"),
        NATS_USER: pick("NATS_USER"),
        NATS_PASSWORD: pick("NATS_PASSWORD"),
        NATS_CREDS: pick("NATS_CREDS"),
        NATS_TLS_CA: pick("NATS_TLS_CA"),
        NATS_TLS_CERT: pick("NATS_TLS_CERT"),
        NATS_TLS_KEY: pick("NATS_TLS_KEY"),
      });
    if (!r.success) {
      for (const i of r.error.issues)
        faults.push(
          `${String(i.path[0])}_${sfx}: ${pick(String(i.path[0])) === undefined ? `required for region ${name}` : i.message}`,
        );
      continue;
    }
    out.push({ name, natsUrl: r.data.NATS_URL, auth: natsAuthFromEnv(r.data), databaseUrl: r.data.DATABASE_URL });
  }
  if (faults.length)
    throw new ConfigError(
      `invalid configuration:\n${faults.map((f) => `  ${f}`).join("\n")}`,
      faults.map((f) => f.split(":")[0]!),
    );
  return out;
}
