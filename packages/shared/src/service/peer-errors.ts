// A peer that resets a socket (Postgres restarting, a NATS server going away) must not kill the
// process: the drivers reconnect on their own. Seen: postgres.js under Bun can surface a
// connection's `read ECONNRESET` as an uncaught error when the server stops mid-query, which
// killed every solver at once during a Postgres restart. Anything else still ends the process.

const PEER_CODES = new Set([
  "ECONNRESET",
  "EPIPE",
  "ECONNREFUSED",
  "ETIMEDOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
]);

/** True for an error raised by a peer closing or resetting a connection. */
export function isPeerConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && PEER_CODES.has(code);
}

/**
 * Keeps the process alive through uncaught peer connection errors (logged as errors); any other
 * uncaught error is logged and ends the process with code 1, as without the handler.
 */
export function survivePeerResets(log: { error(o: object, m: string): void }): void {
  const handle = (err: unknown, kind: string) => {
    if (isPeerConnectionError(err)) {
      log.error({ err: (err as Error).message, kind }, "a connection was reset by its peer; the driver reconnects");
      return;
    }
    log.error({ err: err instanceof Error ? (err.stack ?? err.message) : String(err), kind }, "fatal");
    process.exit(1);
  };
  process.on("uncaughtException", (e) => handle(e, "uncaughtException"));
  process.on("unhandledRejection", (e) => handle(e, "unhandledRejection"));
}
