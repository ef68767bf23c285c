import type { JetStreamClient, JsMsg } from "@nats-io/jetstream";
import { publishWithRetry } from "@pipeline/shared/nats";
import type { TaskEvent } from "@pipeline/shared/schemas";
import { dlqSubject, eventSubject } from "@pipeline/shared/subjects";
import type { Outcome } from "../domain/outcome.ts";

export interface EventSink {
  publish(ev: Omit<TaskEvent, "region" | "at">): Promise<void>;
  /** A fleet-level event (breaker opened/closed...) on `events.<region>.<kind>`. */
  alert(kind: string, data: Record<string, unknown>): Promise<void>;
  /** A dead-lettered task on `dlq.<region>.<type>`. */
  deadLetter(taskId: string, type: string, data: Record<string, unknown>): Promise<void>;
}

export function createEventSink(js: JetStreamClient, region: string, onError: (err: Error) => void): EventSink {
  const send = async (subject: string, body: unknown, msgID: string) => {
    try {
      await publishWithRetry(js, subject, JSON.stringify(body), msgID, 5000);
    } catch (err) {
      onError(err as Error);
    }
  };
  return {
    publish: (ev) => send(eventSubject(region, ev.kind), { ...ev, region, at: new Date().toISOString() }, `${ev.taskId}:${ev.version}:${ev.kind}`),
    alert: (kind, data) => send(eventSubject(region, kind), { kind, region, at: new Date().toISOString(), data }, `${kind}:${Date.now()}:${Math.random()}`),
    deadLetter: (taskId, type, data) => send(dlqSubject(region, type), { taskId, region, at: new Date().toISOString(), ...data }, `dlq:${taskId}:${String(data.attempts ?? "")}:${String(data.redrives ?? "")}`),
  };
}

/** Applies the handler's outcome to the message: the one place that acks, naks or terms. */
export function applyOutcome(msg: JsMsg, o: Outcome): void {
  if (o.kind === "ack") msg.ack();
  else if (o.kind === "nak") msg.nak(o.delayMs);
  else msg.term(o.reason);
}
