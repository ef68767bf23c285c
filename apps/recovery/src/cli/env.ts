// What every CLI command gets, and the small helpers they share (output, actor, a bounded connect).
import { spawnSync } from "node:child_process";
import { hostname } from "node:os";
import type { Logger } from "@pipeline/shared/log";
import { connectNats, type NatsConnection, natsAuthFromEnv } from "@pipeline/shared/nats";
import type { RecoveryConfig } from "../config.ts";
import { redactUrl } from "../redact-url.ts";

/** The parsed configuration and the CLI's logger, built once by main. */
export interface CliEnv {
  config: RecoveryConfig;
  log: Logger;
}

/** Prints the value as JSON (`--json`) or the text for people; the userinfo of any URL in it redacted. */
export const print = (json: boolean | undefined, value: unknown, text: string) =>
  console.log(redactUrl(json ? JSON.stringify(value, null, 2) : text));

/**
 * The authenticated user of this process: the account of its uid (not `USER`, which anyone can
 * set); under sudo (uid 0), the user who ran sudo.
 */
export function loginOf(o: { uid: number; username: string; sudoUser: string | undefined }): string {
  return o.uid === 0 && o.sudoUser ? o.sudoUser : o.username;
}

/**
 * Who is acting, as audited: the login and the host; `--by` (a name the operator gives) is kept in
 * front but never replaces the login (`ops@host (login alice)`).
 */
export function actorOf(
  by: string | undefined,
  o: { uid: number; username: string; sudoUser: string | undefined; host: string } = currentUser(),
): string {
  const login = loginOf(o);
  return by && by !== login ? `${by}@${o.host} (login ${login})` : `${login}@${o.host}`;
}

/**
 * The account name of the process's uid through the system's user database (`id -un`): Bun's
 * `os.userInfo().username` is read from `USER`, which anyone can set.
 */
function accountName(uid: number): string {
  const r = spawnSync("id", ["-un"], { encoding: "utf8", timeout: 2000 });
  return (r.status === 0 && r.stdout.trim()) || `uid ${uid}`;
}

function currentUser() {
  const uid = process.getuid?.() ?? -1;
  return { uid, username: accountName(uid), sudoUser: process.env.SUDO_USER, host: hostname() };
}

/** Connects to NATS or gives up after `ms` (the client itself would wait forever). */
export async function natsWithin({ config, log }: CliEnv, ms: number): Promise<NatsConnection> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      connectNats(config.NATS_URL, "recovery-cli", natsAuthFromEnv(config), (e) =>
        log.error({ err: e.message }, "nats error"),
      ),
      new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(() => reject(new Error(`no NATS at ${redactUrl(config.NATS_URL)} within ${ms} ms`)), ms)),
      ),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
