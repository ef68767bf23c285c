// Reading a running dev stack's connection settings, for the apps' CLIs (`recovery`, `rollout`),
// which use a dev stack when the environment names none. The file is written by `infra/stack.ts`
// through @pipeline/devstack, which also starts the stack; nothing here starts, fetches or writes.
// The file holds no password: it points at the 0600 credentials files of the stack's nats-server
// and of its Postgres logins (one per app).
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { urlWithLogin } from "./db/roles.ts";
import { NATS_ROLES, type NatsRole } from "./nats/permissions.ts";

export const DevStack = z.object({
  pid: z.number().int().positive(),
  startedAt: z.string(),
  natsUrl: z.string().min(1),
  natsVersion: z.string(),
  /** The nats-server's credentials file (0600): one user and password per role. */
  natsCredentials: z.string().min(1).optional(),
  /** The stack's database (with the stack's own Postgres: no password; the logins are in pgCredentials). */
  databaseUrl: z.string().regex(/^postgres(ql)?:\/\//),
  /** The 0600 file of the stack's Postgres logins (writePgCredentials): each app connects with its own. */
  pgCredentials: z.string().min(1).optional(),
  /** Dev defaults of the apps' settings the user did not set (none of them the user's own secrets). */
  env: z.record(z.string(), z.string()),
});
export type DevStack = z.infer<typeof DevStack>;

const PgLogin = z.object({ user: z.string().min(1), password: z.string().min(1) });
/** The dev stack's Postgres logins: the owner's part (the admin: migrations, recovery) and one per app role. */
export const PgCredentials = z.object({ owner: PgLogin, gateway: PgLogin, solver: PgLogin, rollout: PgLogin });
export type PgCredentials = z.infer<typeof PgCredentials>;

export interface NatsCredentials {
  user: string;
  password: string;
}

/** A nats-server's credentials file (written by @pipeline/devstack's `startNatsServer`): one user per role. */
export type CredentialsFile = Record<NatsRole | "system" | "leaf", NatsCredentials>;

/** Reads one role's user and password from a credentials file written by `startNatsServer`. */
export function readNatsCredentials(file: string, role: NatsRole): NatsCredentials {
  const parsed = JSON.parse(readFileSync(file, "utf8")) as Partial<CredentialsFile>;
  const c = parsed[role];
  if (!c || typeof c.user !== "string" || typeof c.password !== "string")
    throw new Error(`${file}: no credentials for role "${role}"`);
  return c;
}

/** `.data/dev-stack.json` of the repository (DEV_STACK_FILE, or DATA_DIR's, overrides). */
export function devStackFile(env: Record<string, string | undefined> = process.env): string {
  if (env.DEV_STACK_FILE) return resolve(env.DEV_STACK_FILE);
  const dataDir = env.DATA_DIR ?? resolve(import.meta.dir, "..", "..", "..", ".data");
  return join(dataDir, "dev-stack.json");
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The stack described by `file` when its process still runs; undefined otherwise (absent, stale or unreadable). */
export function readDevStack(file: string): DevStack | undefined {
  if (!existsSync(file)) return undefined;
  try {
    const s = DevStack.parse(JSON.parse(readFileSync(file, "utf8")));
    return alive(s.pid) ? s : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The database URL of `role` (its own login, packages/shared/src/db/roles.ts); the recovery
 * service and the admin get the owner's; an app of no role (the emulator) none with a password.
 */
export function devStackDatabaseUrl(stack: DevStack, role: NatsRole | undefined): string {
  if (!stack.pgCredentials || role === undefined) return stack.databaseUrl;
  const c = PgCredentials.parse(JSON.parse(readFileSync(stack.pgCredentials, "utf8")));
  const login = role === "gateway" || role === "solver" || role === "rollout" ? c[role] : c.owner;
  return urlWithLogin(stack.databaseUrl, login);
}

/**
 * The environment an app of `role` gets from the dev stack: its defaults, NATS_URL, DATABASE_URL
 * (with the role's own Postgres login) and the role's NATS user. A variable the environment
 * already sets wins, and NATS credentials are only added when the environment names none of its own.
 */
export function devStackEnv(
  stack: DevStack,
  role: NatsRole | undefined,
  env: Record<string, string | undefined>,
): Record<string, string> {
  const out: Record<string, string> = {
    ...stack.env,
    NATS_URL: stack.natsUrl,
    DATABASE_URL: env.DATABASE_URL ? env.DATABASE_URL : devStackDatabaseUrl(stack, role),
  };
  if (role && stack.natsCredentials && !env.NATS_USER && !env.NATS_CREDS && NATS_ROLES.includes(role)) {
    const c = readNatsCredentials(stack.natsCredentials, role);
    out.NATS_USER = c.user;
    out.NATS_PASSWORD = c.password;
  }
  for (const k of Object.keys(out)) if (env[k] !== undefined && env[k] !== "") delete out[k];
  return out;
}
