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
    // Without it every request (each JetStream publish waits for its PubAck through one) builds
    // two Error objects up front, stack trace included, for a timeout that rarely comes: a few
    // percent of the gateway's and the solver's CPU. Errors keep their types and messages.
    noAsyncTraces: true,
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
