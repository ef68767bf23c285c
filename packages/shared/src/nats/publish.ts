import type { PubAck } from "@nats-io/jetstream";
import { isRetryablePublishError } from "./connection.ts";
import type { Publisher } from "./pub-acks.ts";

/**
 * Publishes with `Nats-Msg-Id` and waits for the PubAck, retrying retryable failures with the
 * same id until `deadlineMs` passes (JetStream deduplicates, so a retry never doubles a message).
 * `js`: a JetStreamClient, or on the hot paths a createPubAckPublisher (pub-acks.ts).
 */
export async function publishWithRetry(
  js: Publisher,
  subject: string,
  data: Uint8Array | string,
  msgID: string,
  deadlineMs = 10_000,
): Promise<PubAck> {
  const until = Date.now() + deadlineMs;
  let wait = 100;
  for (;;) {
    try {
      return await js.publish(subject, data, { msgID, timeout: Math.min(5000, Math.max(500, until - Date.now())) });
    } catch (err) {
      if (!isRetryablePublishError(err) || Date.now() + wait > until) throw err;
      await Bun.sleep(wait);
      wait = Math.min(wait * 2, 1000);
    }
  }
}
