import { connect, type NatsConnection } from "@nats-io/transport-node";

export type { NatsConnection };

/**
 * Connects with reconnects forever (a restarted nats-server must not stop a service); the caller
 * drains on shutdown.
 */
export async function connectNats(servers: string, name: string): Promise<NatsConnection> {
  return connect({
    servers: servers.split(","),
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    waitOnFirstConnect: true,
    timeout: 5000,
  });
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
