import type { JsMsg } from "@nats-io/jetstream";
import { type Publisher, publishWithRetry } from "@pipeline/shared/nats";
import type { TaskEvent } from "@pipeline/shared/schemas";
import { dlqSubject, eventSubject, subjectOfEvent } from "@pipeline/shared/subjects";
import type { Outcome } from "../domain/outcome.ts";

export interface EventSink {
  publish(ev: Omit<TaskEvent, "region" | "at">): Promise<void>;
  /** A fleet-level event (breaker opened/closed...) on `events.<region>.<kind>`. */
  alert(kind: string, data: Record<string, unknown>): Promise<void>;
  /** A dead-lettered task on `dlq.<region>.<type>`. */
  deadLetter(taskId: string, type: string, data: Record<string, unknown>): Promise<void>;
}

/**
 * How long an event's publish is retried. Longer than a stream's leader election on a 3-node
 * region (a node killed: up to ~9 s of nats-server's election timeout, plus the client's
 * reconnect), so a node lost does not lose events (tests/region-3node.test.ts counts them); the
 * transition stands either way (Postgres is the truth).
 */
export const EVENT_PUBLISH_DEADLINE_MS = 15_000;

export function createEventSink(js: Publisher, region: string, onError: (err: Error) => void): EventSink {
  const send = async (subject: string, body: unknown, msgID: string) => {
    try {
      await publishWithRetry(js, subject, JSON.stringify(body), msgID, EVENT_PUBLISH_DEADLINE_MS);
    } catch (err) {
      onError(err as Error);
    }
  };
  return {
    // A final event of a task with a callback goes to its hook subject (the notifier's).
    publish: (ev) =>
      send(
        subjectOfEvent(region, ev),
        { ...ev, region, at: new Date().toISOString() },
        `${ev.taskId}:${ev.version}:${ev.kind}`,
      ),
    alert: (kind, data) =>
      send(
        eventSubject(region, kind),
        { kind, region, at: new Date().toISOString(), data },
        `${kind}:${Date.now()}:${Math.random()}`,
      ),
    deadLetter: (taskId, type, data) =>
      send(
        dlqSubject(region, type),
        { taskId, region, at: new Date().toISOString(), ...data },
        `dlq:${taskId}:${String(data.attempts ?? "")}:${String(data.redrives ?? "")}`,
      ),
  };
}

/** What acknowledges a JetStream delivery: a JsMsg, or an AckHandle that outlived it. */
export type Acknowledgeable = Pick<JsMsg, "ack" | "nak" | "term" | "working">;

const encoder = new TextEncoder();
const ACK = encoder.encode("+ACK");
const NAK = encoder.encode("-NAK");
const WPI = encoder.encode("+WPI");
const TERM = encoder.encode("+TERM");

/**
 * Acknowledges a delivery by its reply subject alone, as the client's JsMsg does (the same
 * payloads published to `$JS.ACK.…`), so that a task held for minutes keeps ~100 bytes instead
 * of its message (the message objects, its parsed delivery info and views on the socket's read
 * buffer: about a kilobyte). After the first final acknowledgement (not `working()`) the others
 * are no-ops, as with JsMsg.
 */
export function ackHandle(publish: (subject: string, payload: Uint8Array) => void, reply: string): Acknowledgeable {
  return new AckHandle(publish, reply);
}

/** A class, not closures: methods on the prototype cost a held task nothing. */
class AckHandle implements Acknowledgeable {
  private done = false;
  constructor(
    private readonly publish: (subject: string, payload: Uint8Array) => void,
    private readonly reply: string,
  ) {}
  private send(payload: Uint8Array, final = true): void {
    if (this.done) return;
    if (final) this.done = true;
    this.publish(this.reply, payload);
  }
  ack(): void {
    this.send(ACK);
  }
  nak(millis?: number): void {
    this.send(millis && millis > 0 ? encoder.encode(`-NAK ${JSON.stringify({ delay: millis * 1_000_000 })}`) : NAK);
  }
  /** `+TERM <reason>`: the server keeps the reason in its MSG_TERMINATED advisory. */
  term(reason?: string): void {
    this.send(reason ? encoder.encode(`+TERM ${reason}`) : TERM);
  }
  working(): void {
    this.send(WPI, false);
  }
}

/** Applies the handler's outcome to the message: the one place that acks, naks or terms. */
export function applyOutcome(msg: Acknowledgeable, o: Outcome): void {
  if (o.kind === "ack") msg.ack();
  else if (o.kind === "nak") msg.nak(o.delayMs);
  // With the reason: the server (>= 2.11) puts it in the MSG_TERMINATED advisory, where an
  // operator watching `$JS.EVENT.ADVISORY.>` sees why. (ack-handle.int.test.ts shows it.)
  else msg.term(o.reason);
}
