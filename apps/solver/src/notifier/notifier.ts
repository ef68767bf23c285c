import type { Consumer, ConsumerMessages, JsMsg } from "@nats-io/jetstream";
import type { Logger } from "@pipeline/shared/log";
import { toTaskView } from "@pipeline/shared/tasks";
import { signWebhook, WEBHOOK_HEADERS } from "@pipeline/shared/webhooks";
import { z } from "zod";
import { applyOutcome } from "../adapters/nats.ts";
import type { DeliveryStore } from "../adapters/deliveries.ts";
import { ack, nak, type Outcome } from "../domain/outcome.ts";
import { backoff } from "../domain/timing.ts";

const FINAL = new Set(["completed", "failed", "cancelled"]);
const EventHead = z.object({ taskId: z.uuid(), kind: z.string() });

export interface NotifierDeps {
  consumer: Consumer;
  store: DeliveryStore;
  secret: string;
  timeoutMs: number;
  retryBaseMs: number;
  retryMaxMs: number;
  concurrency: number;
  log: Logger;
  fetch?: typeof fetch;
}

/**
 * Sends a signed POST to a task's callbackUrl once per final state. It consumes EVENTS with a
 * durable consumer, so a crash resumes where it stopped; a delivery is retried with backoff
 * until the receiver answers 2xx, and never sent again after that (webhook_deliveries).
 * Receivers dedup on the `x-pipeline-delivery` id.
 */
export function createNotifier(deps: NotifierDeps) {
  let running = false;
  let loop: Promise<void> | undefined;
  let messages: ConsumerMessages | undefined;
  const inflight = new Set<Promise<void>>();
  const http = deps.fetch ?? fetch;

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
    const deliveryId = `${row.id}:${row.state}:${row.redrives}`;
    const { delivered } = await deps.store.begin(deliveryId, row.id, row.state);
    if (delivered) return ack("already delivered");
    const body = JSON.stringify({ deliveryId, event: `task.${row.state}`, task: toTaskView(row, new Date()) });
    const ts = Math.floor(Date.now() / 1000);
    let status: number | null = null;
    try {
      const res = await http(row.callbackUrl, {
        method: "POST",
        body,
        headers: {
          "content-type": "application/json",
          [WEBHOOK_HEADERS.delivery]: deliveryId,
          [WEBHOOK_HEADERS.timestamp]: String(ts),
          [WEBHOOK_HEADERS.signature]: signWebhook(deps.secret, ts, body),
        },
        signal: AbortSignal.timeout(deps.timeoutMs),
        redirect: "manual",
      });
      status = res.status;
      await res.arrayBuffer().catch(() => {});
      if (res.ok) {
        await deps.store.delivered(deliveryId, res.status);
        return ack("delivered");
      }
    } catch (err) {
      const attempts = await deps.store.failed(deliveryId, null, (err as Error).message);
      return nak(backoff(attempts, deps.retryBaseMs, deps.retryMaxMs), "callback unreachable");
    }
    const attempts = await deps.store.failed(deliveryId, status, `HTTP ${status}`);
    deps.log.warn({ taskId: row.id, status, attempts }, "callback refused; will retry");
    return nak(backoff(attempts, deps.retryBaseMs, deps.retryMaxMs), `callback answered ${status}`);
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
