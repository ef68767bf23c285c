import type { Consumer, JetStreamClient, JsMsg } from "@nats-io/jetstream";
import { publishWithRetry } from "@pipeline/shared/nats";
import type { TaskEvent } from "@pipeline/shared/schemas";
import { eventSubject } from "@pipeline/shared/subjects";
import type { Outcome } from "../domain/outcome.ts";

export interface EventSink {
  publish(ev: Omit<TaskEvent, "region" | "at">): Promise<void>;
}

export function createEventSink(js: JetStreamClient, region: string, onError: (err: Error) => void): EventSink {
  return {
    async publish(ev) {
      const full: TaskEvent = { ...ev, region, at: new Date().toISOString() };
      try {
        await publishWithRetry(js, eventSubject(region, ev.kind), JSON.stringify(full), `${ev.taskId}:${ev.version}:${ev.kind}`, 5000);
      } catch (err) {
        onError(err as Error);
      }
    },
  };
}

/** Applies the handler's outcome to the message: the one place that acks, naks or terms. */
export function applyOutcome(msg: JsMsg, o: Outcome): void {
  if (o.kind === "ack") msg.ack();
  else if (o.kind === "nak") msg.nak(o.delayMs);
  else msg.term(o.reason);
}

/** Pulls up to `max` messages, waiting at most `expiresMs` for the first. */
export async function fetchBatch(consumer: Consumer, max: number, expiresMs: number): Promise<AsyncIterable<JsMsg>> {
  return consumer.fetch({ max_messages: max, expires: expiresMs });
}
