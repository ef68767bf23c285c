import { readFileSync } from "node:fs";
import { connect, credsAuthenticator, type Msg, type NatsConnection, type Subscription } from "@nats-io/transport-node";

export type { Msg, NatsConnection, Subscription };

/** How a client proves who it is: user and password, or a creds file; TLS when configured. */
export interface NatsAuth {
  user?: string;
  pass?: string;
  /** A `.creds` file (JWT and nkey seed) of an operator-mode deployment. */
  credsFile?: string;
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
}

/** The NATS credentials of an app, from its parsed environment (see `natsEnv`). */
export function natsAuthFromEnv(env: {
  NATS_USER?: string | undefined;
  NATS_PASSWORD?: string | undefined;
  NATS_CREDS?: string | undefined;
  NATS_TLS_CA?: string | undefined;
  NATS_TLS_CERT?: string | undefined;
  NATS_TLS_KEY?: string | undefined;
}): NatsAuth {
  const auth: NatsAuth = {};
  if (env.NATS_USER) auth.user = env.NATS_USER;
  if (env.NATS_PASSWORD) auth.pass = env.NATS_PASSWORD;
  if (env.NATS_CREDS) auth.credsFile = env.NATS_CREDS;
  if (env.NATS_TLS_CA || env.NATS_TLS_CERT || env.NATS_TLS_KEY) {
    auth.tls = {};
    if (env.NATS_TLS_CA) auth.tls.caFile = env.NATS_TLS_CA;
    if (env.NATS_TLS_CERT) auth.tls.certFile = env.NATS_TLS_CERT;
    if (env.NATS_TLS_KEY) auth.tls.keyFile = env.NATS_TLS_KEY;
  }
  return auth;
}

/**
 * The inbox prefix of a user's connections (`_INBOX.<user>`): the replies to its requests and the
 * messages its pull consumers fetch come there, and an app's user may subscribe to its own prefix
 * only (permissions.ts). With one shared `_INBOX.>` any app could read what another pulled or
 * requested (the solver's EVENTS deliveries, recovery's reads of BODIES). Under `_INBOX.` still:
 * an app of this version also runs under the permissions of the version before (`_INBOX.>`), so
 * the apps can be upgraded before the servers' permissions.
 */
export function inboxPrefixOf(user: string): string {
  return `_INBOX.${user.replace(/[^A-Za-z0-9_-]/g, "_")}`;
}

/** The inbox prefix a connection was opened with (the client keeps it in its options; not in its typed interface). */
export function connectionInboxPrefix(nc: NatsConnection): string | undefined {
  return (nc as unknown as { options?: { inboxPrefix?: string } }).options?.inboxPrefix || undefined;
}

/**
 * Connects with reconnects forever (a restarted nats-server must not stop a service); the caller
 * drains on shutdown. Errors the server reports asynchronously (a permissions violation) go to
 * `onError`, which never sees a credential. A connection with a user name takes its inboxes
 * under that user's prefix (inboxPrefixOf).
 */
export async function connectNats(
  servers: string,
  name: string,
  auth: NatsAuth = {},
  onError: (err: Error) => void = (e) => console.error(`[nats ${name}] ${e.message}`),
  /** How soon a silent server is noticed (the client's default: 2 pings 2 min apart). */
  liveness?: { pingIntervalMs: number; maxPingOut: number },
): Promise<NatsConnection> {
  const nc = await connect({
    servers: servers.split(","),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    waitOnFirstConnect: true,
    timeout: 5000,
    // Without it every request (each JetStream publish waits for its PubAck through one) builds
    // two Error objects up front, stack trace included, for a timeout that rarely comes: a few
    // percent of the gateway's and the solver's CPU. Errors keep their types and messages.
    noAsyncTraces: true,
    ...(auth.user !== undefined ? { user: auth.user, inboxPrefix: inboxPrefixOf(auth.user) } : {}),
    ...(auth.pass !== undefined ? { pass: auth.pass } : {}),
    ...(auth.credsFile ? { authenticator: credsAuthenticator(new Uint8Array(readFileSync(auth.credsFile))) } : {}),
    ...(auth.tls ? { tls: auth.tls } : {}),
    ...(liveness ? { pingInterval: liveness.pingIntervalMs, maxPingOut: liveness.maxPingOut } : {}),
  });
  void (async () => {
    for await (const s of nc.status()) if (s.type === "error") onError(s.error);
  })().catch(() => {});
  return nc;
}

/**
 * True for publish failures worth retrying with the same Nats-Msg-Id: no responders or a
 * leader election (the client reports the 503 as "jetstream is not enabled"), timeouts,
 * a connection that is reconnecting.
 */
export function isRetryablePublishError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const text = `${err.name} ${err.message}`.toLowerCase();
  return /no responders|not enabled|timeout|timed out|503|disconnect|reconnect|closed|connection/.test(text);
}
