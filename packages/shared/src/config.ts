import { z } from "zod";
import { parseRegions } from "./regions/home.ts";
import { fieldErrors } from "./schemas/zod-issues.ts";
import { REGION_PATTERN } from "./subjects.ts";

/** Raised when configuration does not parse; the message names every variable at fault. */
export class ConfigError extends Error {
  override name = "ConfigError";
  constructor(
    message: string,
    readonly fields: string[],
  ) {
    super(message);
  }
}

/**
 * Parses an environment with a zod object schema. Throws a ConfigError naming each variable
 * at fault, never its value (values may be secrets).
 */
export function parseEnv<S extends z.ZodType>(schema: S, env: Record<string, string | undefined>): z.infer<S> {
  const r = schema.safeParse(env);
  if (r.success) return r.data;
  const errors = fieldErrors(r.error).map((f) => ({ ...f, field: f.field === "(root)" ? "(env)" : f.field }));
  const fields = errors.map((f) => f.field);
  const lines = errors.map((f) => `  ${f.field}: ${f.message}`);
  throw new ConfigError(`invalid configuration:\n${lines.join("\n")}`, fields);
}

/**
 * True inside a binary made by `bun build --compile`: its modules live in Bun's virtual file system
 * (`/$bunfs/...`), so paths relative to the source (the repository's `.data/`) mean nothing there.
 */
export function isCompiledBinary(dir: string = import.meta.dir): boolean {
  return dir.startsWith("/$bunfs") || dir.startsWith("B:\\~BUN");
}

/** Env helpers: an integer with bounds, a boolean, a comma list. */
export const envInt = (def: number, min = 0, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(min).max(max).default(def);

export const envBool = (def: boolean) =>
  z
    .enum(["1", "0", "true", "false", "yes", "no"])
    .default(def ? "true" : "false")
    .transform((v) => v === "1" || v === "true" || v === "yes");

export const envList = () =>
  z.string().transform((s) =>
    s
      .split(",")
      .map((x) => x.trim())
      .filter(Boolean),
  );

/** A variable holding JSON, checked by `schema`; an error names the variable and the field inside it. */
export const envJson = <S extends z.ZodType>(schema: S) =>
  z
    .string()
    .optional()
    .transform((s, ctx) => {
      if (s === undefined || s.trim() === "") return undefined;
      try {
        return JSON.parse(s) as unknown;
      } catch {
        ctx.addIssue({ code: "custom", message: "not valid JSON" });
        return z.NEVER;
      }
    })
    .pipe(schema.optional());

const optionalFile = (what: string) => z.string().min(1, `must be the path of ${what}`).optional();

/**
 * How an app authenticates to NATS: a user and password (the dev stack and the tests) or a creds
 * file (operator mode), and TLS files. Never part of NATS_URL, so the URL can be printed.
 */
export const natsAuthEnv = {
  NATS_USER: z.string().min(1).optional(),
  NATS_PASSWORD: z.string().min(1).optional(),
  NATS_CREDS: optionalFile("a .creds file"),
  NATS_TLS_CA: optionalFile("a PEM CA bundle"),
  NATS_TLS_CERT: optionalFile("a PEM client certificate"),
  NATS_TLS_KEY: optionalFile("a PEM client key"),
};

/**
 * Where a process runs: `production` (the default, so that a forgotten setting is the strict one)
 * or `dev` (the dev stack, tests and bench, which set it). Outside dev the apps refuse settings
 * that are only safe on one machine: the known dev secrets, a gateway without API_KEY_PEPPER, a
 * gateway behind a proxy it does not know (docs/security.md, "A load balancer in front").
 */
export const PipelineEnv = z.enum(["production", "dev"]).default("production");
export type PipelineEnv = z.infer<typeof PipelineEnv>;

/** The callback signing masters the dev stack, tests and bench use: public, so refused outside dev. */
export const DEV_WEBHOOK_SECRETS: readonly string[] = [
  "dev-webhook-secret-0001",
  "e2e-webhook-secret-0001",
  "regions-webhook-secret",
];

/** Adds an issue on `field` when `value` is one of the public dev secrets and the process is not a dev one. */
export function refuseDevSecret(
  env: PipelineEnv,
  field: string,
  value: string | undefined,
  ctx: z.RefinementCtx,
): void {
  if (env !== "dev" && value !== undefined && DEV_WEBHOOK_SECRETS.includes(value))
    ctx.addIssue({
      code: "custom",
      path: [field],
      message:
        "is a published dev secret: generate one (openssl rand -hex 32); PIPELINE_ENV=dev allows it on dev stacks only",
    });
}

/** The variables every service shares: NATS, Postgres and the region (one subject token). */
export const commonEnv = {
  PIPELINE_ENV: PipelineEnv,
  NATS_URL: z
    .string()
    .min(1)
    .default("nats://127.0.0.1:14222")
    .refine((u) => !/\/\/[^/@]*@/.test(u), "must not carry credentials (use NATS_USER/NATS_PASSWORD or NATS_CREDS)"),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, "must be a postgres:// URL"),
  REGION: z
    .string()
    .default("local")
    .refine((r) => REGION_PATTERN.test(r), "lower-case letters, digits, '-' and '_' (one subject token)"),
  /** Every region, in one order shared by all of them (`fsn1,hel1`); empty: this region alone. */
  REGIONS: z.string().default(""),
  /** Copies of each stream (TASKS, EVENTS, DLQ, mirrors) in the region's NATS cluster: 3 on a 3-node region. */
  STREAM_REPLICAS: envInt(1, 1, 5),
  ...natsAuthEnv,
};

/** REGIONS as a list that holds REGION (see regions/home.ts); a ConfigError naming REGIONS otherwise. */
export function regionsOf(c: { REGION: string; REGIONS: string }): string[] {
  try {
    return parseRegions(c.REGIONS, c.REGION);
  } catch (err) {
    throw new ConfigError(`invalid configuration:\n  REGIONS: ${(err as Error).message}`, ["REGIONS"]);
  }
}
