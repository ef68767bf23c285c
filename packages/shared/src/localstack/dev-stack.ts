// The running dev stack's connection settings, written by `infra/stack.ts` (the `dev` task of
// the @pipeline/infra workspace) and read by the apps' dev scripts and the recovery CLI when the
// environment does not say otherwise. The file holds no password: it points at the 0600
// credentials files of the stack's nats-server and of its Postgres logins (one per app).
import { chmodSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { urlWithLogin } from "../db/roles.ts";
import { NATS_ROLES, type NatsRole } from "../nats/permissions.ts";
import { readNatsCredentials } from "./nats-server.ts";

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

/** `.data/dev-stack.json` of the repository (DEV_STACK_FILE, or DATA_DIR's, overrides). */
export function devStackFile(env: Record<string, string | undefined> = process.env): string {
  if (env.DEV_STACK_FILE) return resolve(env.DEV_STACK_FILE);
  const dataDir = env.DATA_DIR ?? resolve(import.meta.dir, "..", "..", "..", "..", ".data");
  return join(dataDir, "dev-stack.json");
}

export function writeDevStack(file: string, stack: DevStack): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(stack, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
}

export function removeDevStack(file: string, pid = process.pid): void {
  const s = readDevStack(file);
  if (!s || s.pid === pid) rmSync(file, { force: true });
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

/** Waits for a running dev stack (the infra task starts alongside the apps under turbo). */
export async function waitForDevStack(file: string, timeoutMs: number, onWait?: () => void): Promise<DevStack> {
  const until = Date.now() + timeoutMs;
  let said = false;
  for (;;) {
    const s = readDevStack(file);
    if (s) return s;
    if (Date.now() > until) throw new Error(`no dev stack in ${file} after ${Math.round(timeoutMs / 1000)} s: is the @pipeline/infra dev task running (turbo run dev)?`);
    if (!said) onWait?.();
    said = true;
    await Bun.sleep(200);
  }
}

const PgLogin = z.object({ user: z.string().min(1), password: z.string().min(1) });
/** The dev stack's Postgres logins: the owner's part (the admin: migrations, recovery) and one per app role. */
export const PgCredentials = z.object({ owner: PgLogin, gateway: PgLogin, solver: PgLogin, rollout: PgLogin });
export type PgCredentials = z.infer<typeof PgCredentials>;

/** Writes the logins file (0600: it holds passwords). */
export function writePgCredentials(file: string, c: PgCredentials): void {
  writeFileSync(file, `${JSON.stringify(c, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
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
export function devStackEnv(stack: DevStack, role: NatsRole | undefined, env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = { ...stack.env, NATS_URL: stack.natsUrl, DATABASE_URL: env.DATABASE_URL ? env.DATABASE_URL : devStackDatabaseUrl(stack, role) };
  if (role && stack.natsCredentials && !env.NATS_USER && !env.NATS_CREDS && NATS_ROLES.includes(role)) {
    const c = readNatsCredentials(stack.natsCredentials, role);
    out.NATS_USER = c.user;
    out.NATS_PASSWORD = c.password;
  }
  for (const k of Object.keys(out)) if (env[k] !== undefined && env[k] !== "") delete out[k];
  return out;
}

/** The roles `infra/with-stack.ts` accepts: the NATS users, and `none` for an app without NATS. */
export const NATS_ROLES_FOR_DEV = [...NATS_ROLES.filter((r) => r !== "admin"), "none"] as const;
