import type { Consumer, ConsumerMessages, JsMsg } from "@nats-io/jetstream";
import type { Logger } from "@pipeline/shared/log";
import { callbackHostKey } from "@pipeline/shared/net";
import { TERMINAL_STATES } from "@pipeline/shared/schemas";
import { eventKindOf } from "@pipeline/shared/subjects";
import { z } from "zod";
import type { DeliveryStore } from "../adapters/deliveries.ts";
import { applyOutcome } from "../adapters/nats.ts";
import { ack, nak, type Outcome } from "../domain/outcome.ts";

const FINAL = new Set<string>(TERMINAL_STATES);
// `data.callback` (completed and failed events of this version): whether the task has a callback
// URL; false: nothing to record, no row read. Absent (other writers, older solvers): the row says.
const EventHead = z.object({
  taskId: z.uuid(),
  kind: z.string(),
  data: z.object({ callback: z.boolean().optional() }).optional(),
});

export interface NotifierDeps {
  consumer: Consumer;
  store: Pick<DeliveryStore, "callbackTarget" | "enqueue">;
  /** Called once a delivery is recorded (the dispatcher sends it). */
  onRecorded?: () => void;
  retryBaseMs: number;
  concurrency: number;
  log: Logger;
}

/**
 * Turns final-state events into `webhook_deliveries` rows, one per (task, final state, redrive),
 * and acks each event once its row exists. It consumes EVENTS with a durable consumer, so a
 * crash resumes where it stopped. Sending, retrying and giving up are the dispatcher's, from the
 * table (dispatcher.ts): a receiver that refuses its callbacks holds no event pending here, so it
 * cannot fill the consumer's max_ack_pending and stop everyone else's callbacks.
 */
export function createNotifier(deps: NotifierDeps) {
  let running = false;
  let loop: Promise<void> | undefined;
  let messages: ConsumerMessages | undefined;
  const inflight = new Set<Promise<void>>();

  /** The event's head, or an outcome when there is nothing to record (decided without a read). */
  function triage(msg: JsMsg): z.infer<typeof EventHead> | Outcome {
    const head = EventHead.safeParse(
      (() => {
        try {
          return msg.json();
        } catch {
          return undefined;
        }
      })(),
    );
    if (!head.success || !FINAL.has(head.data.kind)) return ack("not a final-state event");
    if (head.data.data?.callback === false) return ack("no callback");
    return head.data;
  }

  async function handle(msg: JsMsg, head: z.infer<typeof EventHead>): Promise<Outcome> {
    const row = await deps.store.callbackTarget(head.taskId);
    if (!row?.callbackUrl) return ack("no callback");
    if (row.state !== head.kind) return ack("state moved on (a redrive); the later event notifies");
    await deps.store.enqueue({
      deliveryId: `${row.id}:${row.state}:${row.redrives}`,
      taskId: row.id,
      state: row.state,
      owner: row.owner,
      host: callbackHostKey(row.callbackUrl),
    });
    deps.onRecorded?.();
    return ack("delivery recorded");
  }

  /** Hands a final-state event to `handle`, at most `concurrency` at once, with a heartbeat while it runs. */
  async function dispatch(msg: JsMsg, head: z.infer<typeof EventHead>): Promise<void> {
    while (inflight.size >= deps.concurrency) await Promise.race(inflight);
    const heartbeat = setInterval(() => msg.working(), 10_000);
    const p = handle(msg, head)
      .catch((err: Error) => nak(deps.retryBaseMs, `notifier error: ${err.message}`))
      .then((o) => applyOutcome(msg, o))
      .finally(() => {
        clearInterval(heartbeat);
        inflight.delete(p);
      });
    inflight.add(p);
  }

  return {
    start() {
      running = true;
      loop = (async () => {
        while (running) {
          try {
            // A long-lived pull (see the worker): short fetches lose a message now and then.
            messages = await deps.consumer.consume({ max_messages: deps.concurrency, expires: 5000 });
            for await (const msg of messages) {
              if (!running) break;
              // The consumer's filter (notifierHooksConsumerConfig) delivers final-state events only;
              // anything else (a consumer made by hand) is acked by its subject's kind, unparsed.
              if (!FINAL.has(eventKindOf(msg.subject))) {
                msg.ack();
                continue;
              }
              // Most final events say there is nothing to record (no callback URL): acked here.
              const head = triage(msg);
              if ("taskId" in head) await dispatch(msg, head);
              else applyOutcome(msg, head);
            }
          } catch (err) {
            if (running) {
              deps.log.warn({ err: (err as Error).message }, "notifier consume failed; retrying");
              await Bun.sleep(500);
            }
          }
        }
      })();
    },
    async stop() {
      running = false;
      messages?.stop();
      await loop;
      await Promise.all([...inflight]);
    },
  };
}
