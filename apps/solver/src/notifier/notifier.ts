import type { Consumer, ConsumerMessages, JsMsg } from "@nats-io/jetstream";
import type { Logger } from "@pipeline/shared/log";
import { callbackHostKey } from "@pipeline/shared/net";
import { TERMINAL_STATES } from "@pipeline/shared/schemas";
import { z } from "zod";
import { applyOutcome } from "../adapters/nats.ts";
import type { DeliveryStore } from "../adapters/deliveries.ts";
import { ack, nak, type Outcome } from "../domain/outcome.ts";

const FINAL = new Set<string>(TERMINAL_STATES);
const EventHead = z.object({ taskId: z.uuid(), kind: z.string() });

export interface NotifierDeps {
  consumer: Consumer;
  store: Pick<DeliveryStore, "task" | "enqueue">;
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

  async function handle(msg: JsMsg): Promise<Outcome> {
    const head = EventHead.safeParse((() => {
      try {
        return msg.json();
      } catch {
        return undefined;
      }
    })());
    if (!head.success || !FINAL.has(head.data.kind)) return ack("not a final-state event");
    const row = await deps.store.task(head.data.taskId);
    if (!row?.callbackUrl) return ack("no callback");
    if (row.state !== head.data.kind) return ack("state moved on (a redrive); the later event notifies");
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
              while (inflight.size >= deps.concurrency) await Promise.race(inflight);
              const heartbeat = setInterval(() => msg.working(), 10_000);
              const p = handle(msg)
                .catch((err: Error) => nak(deps.retryBaseMs, `notifier error: ${err.message}`))
                .then((o) => applyOutcome(msg, o))
                .finally(() => {
                  clearInterval(heartbeat);
                  inflight.delete(p);
                });
              inflight.add(p);
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
