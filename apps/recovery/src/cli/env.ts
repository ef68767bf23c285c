// What every CLI command gets, and the small helpers they share (output, actor, a bounded connect).
import { hostname } from "node:os";
import type { Logger } from "@pipeline/shared/log";
import { connectNats, natsAuthFromEnv, type NatsConnection } from "@pipeline/shared/nats";
import type { RecoveryConfig } from "../config.ts";
import { redactUrl } from "../redact-url.ts";

/** The parsed configuration and the CLI's logger, built once by main. */
export interface CliEnv {
  config: RecoveryConfig;
  log: Logger;
}

/** Prints the value as JSON (`--json`) or the text for people; the userinfo of any URL in it redacted. */
export const print = (json: boolean | undefined, value: unknown, text: string) => console.log(redactUrl(json ? JSON.stringify(value, null, 2) : text));

/** Who is acting: --by, else the login (audited with the host). */
export const actorOf = (by: string | undefined) => `${by ?? process.env.SUDO_USER ?? process.env.USER ?? "unknown"}@${hostname()}`;

/** Connects to NATS or gives up after `ms` (the client itself would wait forever). */
export async function natsWithin({ config, log }: CliEnv, ms: number): Promise<NatsConnection> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      connectNats(config.NATS_URL, "recovery-cli", natsAuthFromEnv(config), (e) => log.error({ err: e.message }, "nats error")),
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no NATS at ${redactUrl(config.NATS_URL)} within ${ms} ms`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

