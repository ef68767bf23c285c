import pino, { type DestinationStream, type Logger } from "pino";

export type { Logger };

/**
 * Paths pino censors wherever they appear. Keys, tokens and provider answers never reach a log
 * line; see log.test.ts.
 */
export const REDACT_PATHS = [
  "key",
  "apiKey",
  "providerKey",
  "token",
  "answer",
  "authorization",
  "password",
  "secret",
  "webhookUrl",
  "NOTIFY_WEBHOOK_URL",
  "*.key",
  "*.apiKey",
  "*.providerKey",
  "*.token",
  "*.answer",
  "*.authorization",
  "*.password",
  "*.secret",
  "*.webhookUrl",
  "*.NOTIFY_WEBHOOK_URL",
  "req.headers.authorization",
  "headers.authorization",
  "result.token",
  "*.result.token",
];

/** A JSON logger for one service, with redaction on. `LOG_LEVEL` picks the level. */
export function createLogger(service: string, opts: { level?: string; destination?: DestinationStream } = {}): Logger {
  return pino(
    {
      name: service,
      level: opts.level ?? process.env.LOG_LEVEL ?? "info",
      redact: { paths: REDACT_PATHS, censor: "[redacted]" },
      base: { service },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination,
  );
}
