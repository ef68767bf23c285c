import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
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
  const settings = withCredentials(env);
  const r = schema.safeParse(settings);
  if (r.success) return r.data;
  const dir = env.CREDENTIALS_DIRECTORY;
  const errors = fieldErrors(r.error).map((f) => ({ ...f, field: f.field === "(root)" ? "(env)" : f.field }));
  const fields = errors.map((f) => f.field);
  // Under systemd a secret comes as a credential: say where it was looked for when it is missing.
  const where = (field: string) =>
    dir && settings[field] === undefined ? ` (not in the environment, and no credential ${field} in ${dir})` : "";
  const lines = errors.map((f) => `  ${f.field}: ${f.message}${where(f.field)}`);
  throw new ConfigError(`invalid configuration:\n${lines.join("\n")}`, fields);
}

/** A setting's name, and so a credential's: `API_KEY_PEPPER`, `NATS_PASSWORD_HEL1`. */
const SETTING_NAME = /^[A-Z][A-Z0-9_]{0,127}$/;
/** A credential of a folder loaded whole (`LoadCredential=gateway:/dir`): systemd names it `<id>_<file>`. */
const PREFIXED_CREDENTIAL = /^[a-z][a-z0-9-]{0,31}_([A-Z][A-Z0-9_]{0,127})$/;

/**
 * The environment with the secrets systemd hands the process (`LoadCredential=`, docs/deploy.md):
 * when `CREDENTIALS_DIRECTORY` is set, each file there named for a setting (`API_KEY_PEPPER`, or
 * `<id>_API_KEY_PEPPER` when loaded from a directory) gives that setting its content, one trailing
 * newline removed; an empty file leaves it unset. A setting both in the environment and as a
 * credential is refused (which one would win is a trap). Then `DATABASE_PASSWORD` (and
 * `DATABASE_PASSWORD_<REGION>`) goes into the `DATABASE_URL` of the same suffix, which must carry no
 * password of its own: the env files name the database, the credential holds its password. Errors
 * are ConfigErrors naming the setting, never a value.
 */
export function withCredentials(env: Record<string, string | undefined>): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = { ...env };
  const dir = env.CREDENTIALS_DIRECTORY;
  const faults: [string, string][] = [];
  if (dir) {
    let names: string[] = [];
    try {
      names = readdirSync(dir);
    } catch (err) {
      faults.push(["CREDENTIALS_DIRECTORY", `cannot be read (${(err as NodeJS.ErrnoException).code ?? "error"})`]);
    }
    for (const file of names.sort()) {
      const setting = SETTING_NAME.test(file) ? file : PREFIXED_CREDENTIAL.exec(file)?.[1];
      if (!setting) continue;
      let value: string;
      try {
        value = readFileSync(join(dir, file), "utf8").replace(/\r?\n$/, "");
      } catch (err) {
        faults.push([
          setting,
          `its credential ${file} cannot be read (${(err as NodeJS.ErrnoException).code ?? "error"})`,
        ]);
        continue;
      }
      if (value === "") continue;
      if (env[setting] !== undefined && env[setting] !== "")
        faults.push([
          setting,
          `set in the environment and as the credential ${file}: keep it in one place (the credential; remove it from the env file)`,
        ]);
      else out[setting] = value;
    }
  }
  for (const key of Object.keys(out)) {
    const m = /^DATABASE_PASSWORD(_[A-Z0-9_]+)?$/.exec(key);
    const password = out[key];
    if (!m || !password) continue;
    const urlKey = `DATABASE_URL${m[1] ?? ""}`;
    const raw = out[urlKey];
    if (!raw) continue; // the URL's own check names it
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      faults.push([urlKey, "must be a postgres:// URL"]);
      continue;
    }
    if (url.password) faults.push([key, `${urlKey} carries a password already: give it in one place (${key})`]);
    else if (!url.username) faults.push([urlKey, `names no user (postgres://<user>@host/db): ${key} is that user's`]);
    else {
      url.password = password;
      out[urlKey] = url.toString();
    }
  }
  if (faults.length)
    throw new ConfigError(
      `invalid configuration:\n${faults.map(([f, m]) => `  ${f}: ${m}`).join("\n")}`,
      faults.map(([f]) => f),
    );
  return out;
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
