import type { Consumer, ConsumerMessages, JsMsg } from "@nats-io/jetstream";
import type { Logger } from "@pipeline/shared/log";
import { type Priority, TaskMessage } from "@pipeline/shared/schemas";
import { LANES } from "@pipeline/shared/subjects";
import { type Acknowledgeable, ackHandle, applyOutcome } from "../adapters/nats.ts";
import type { SolverStore } from "../adapters/pg.ts";
import type { ProviderClient } from "../adapters/provider.ts";
import { nak, type Outcome, term } from "../domain/outcome.ts";
import { type Handled, type HandlerDeps, handleTask, submitAnew } from "./handle-task.ts";
import { createWaitingRoom, type WaitResult } from "./waiting.ts";

export interface WorkerDeps extends HandlerDeps {
  consumers: Record<Priority, Consumer>;
  store: SolverStore;
  log: Logger;
  concurrency: number;
  fetchBatch: number;
  ackWaitMs: number;
  drainTimeoutMs: number;
  /** Share of the concurrency only the high lane may use. */
  highReserved: number;
  provider: ProviderClient;
  metrics?: HandlerDeps["metrics"] & { outcome(kind: string): void };
  /**
   * The lane's consumer (or the TASKS stream) is gone (queue loss): recreate the topology. The
   * pull subscription resumes by itself once the consumer exists again.
   */
  onConsumerMissing?(lane: Priority, what: string): void;
  /**
   * Publishes on the connection the consumers use: with it a held task keeps an AckHandle (its
   * reply subject) instead of its JetStream message. Without it the messages are kept.
   */
  ackPublish?: (subject: string, payload: Uint8Array) => void;
}

/** A delivery as the worker holds it: what it needs of the message, not the message. */
interface Received {
  handle: Acknowledgeable;
  body: unknown;
  seq: number;
  subject: string;
  deliveries: number;
}

export interface Worker {
  start(): void;
  /** Stops fetching, lets in-flight tasks finish until the deadline, then aborts the rest (they are released for redelivery). */
  stop(): Promise<void>;
  inFlight(): number;
  /** Tasks in the waiting room now (their provider task running, no handler held for them). */
  waiting(): number;
  counters: Record<string, number>;
}

/**
 * The solver loop: one fetch loop per lane, all sharing one in-flight limit. A message is
 * only fetched when a slot is free, so none waits in a local buffer while its AckWait runs.
 */
export function createWorker(deps: WorkerDeps): Worker {
  let running = false;
  let inFlight = 0;
  const active = new Set<Promise<void>>();
  /** Task ids being handled now: only their leases are renewed. */
  const handling = new Set<string>();
  const hard = new AbortController();
  const room = createWaitingRoom(deps, hard.signal);
  const slotWaiters: Array<() => void> = [];
  const loops: Promise<void>[] = [];
  const reserve = Math.min(deps.concurrency - 1, Math.floor(deps.concurrency * deps.highReserved));
  // normal and low may not use the reserved share, so a high task always finds a slot quickly.
  const free = (lane: Priority = "high") => deps.concurrency - inFlight - (lane === "high" ? 0 : reserve);
  const releaseSlot = () => {
    inFlight--;
    for (const w of slotWaiters.splice(0)) w();
  };
  const waitForSlot = async (lane: Priority) => {
    while (running && free(lane) <= 0) await new Promise<void>((r) => slotWaiters.push(r));
  };

  /**
   * Messages held now (handled, or waiting for a slot): one timer keeps them all alive with
   * `working()` every third of the AckWait, rather than a timer (and closure) per message.
   */
  const held = new Set<Acknowledgeable>();
  const workingTimer = { id: undefined as ReturnType<typeof setInterval> | undefined };

  function receive(msg: JsMsg): Received {
    let body: unknown;
    try {
      body = msg.json();
    } catch {
      body = undefined;
    }
    // The client's JsMsg has the reply subject but its interface does not say so: checked here,
    // and the message itself kept when it is not an ack subject.
    const reply = (msg as { reply?: unknown }).reply;
    const handle =
      deps.ackPublish && typeof reply === "string" && reply.startsWith("$JS.ACK.")
        ? ackHandle(deps.ackPublish, reply)
        : msg;
    return { handle, body, seq: msg.seq, subject: msg.subject, deliveries: msg.info.deliveryCount };
  }

  async function process(r: Received): Promise<void> {
    const msg = r.handle;
    held.add(msg);
    let outcome: Outcome;
    try {
      let parsed: TaskMessage;
      try {
        parsed = TaskMessage.parse(r.body);
      } catch {
        outcome = term("unparseable task message");
        deps.log.error({ seq: r.seq, subject: r.subject }, "unparseable task message; terminated");
        applyOutcome(msg, outcome);
        return;
      }
      if (handling.has(parsed.id)) {
        // A second copy of a message we are still handling (redelivered after AckWait ran out
        // while it waited in the pull buffer): never handle one task twice at once.
        outcome = nak(deps.timing.get().leaseMs, "already handling this task");
        applyOutcome(msg, outcome);
        deps.metrics?.event("duplicateDeliveries");
        return;
      }
      handling.add(parsed.id);
      let failed = false;
      const onError = (err: Error) => {
        failed = true;
        if (hard.signal.aborted) return nak(0, "aborted by shutdown");
        deps.log.error({ taskId: parsed.id, err: err.message.slice(0, 300) }, "handler error; will retry");
        return nak(Math.min(deps.timing.get().retryMaxMs, 2000), "handler error");
      };
      const delivery = { taskId: parsed.id, priority: parsed.priority, deliveries: r.deliveries };
      let handled: Handled = await handleTask(delivery, deps, hard.signal).catch(onError);
      // A parked task waits in the waiting room, which finishes it (its step written there) or
      // hands it back only to be submitted anew; then it is parked again, or ends in the submit.
      while (handled.kind === "parked") {
        const waited: WaitResult | Outcome = await room.wait(handled.parked).catch(onError);
        if (waited.kind === "resume") handled = await submitAnew(deps, waited.resume, hard.signal).catch(onError);
        else handled = waited.kind === "done" ? waited.outcome : waited;
      }
      outcome = handled;
      handling.delete(parsed.id);
      if (failed) {
        // Leave the row to the next worker (it resumes from the stored provider id). If the
        // database is what failed, the lease, no longer renewed, runs out instead.
        await deps.store.release(parsed.id, deps.workerId, { polls: 0 }).catch(() => {});
      }
      applyOutcome(msg, outcome);
      deps.metrics?.outcome(outcome.kind);
      deps.log.debug({ taskId: parsed.id, outcome: outcome.kind, reason: outcome.reason }, "task handled");
    } finally {
      held.delete(msg);
    }
  }

  const streams = new Set<ConsumerMessages>();
  /**
   * One long-lived pull subscription per lane (nats.js `consume()`): repeated short `fetch()`es
   * lose a message now and then at the moment a pull expires, which then waits out a whole
   * AckWait. The lane's buffer is small, and a message waiting there for a slot is kept alive
   * with `working()`.
   */
  async function laneLoop(lane: Priority): Promise<void> {
    const consumer = deps.consumers[lane];
    const buffer = Math.max(1, Math.min(deps.fetchBatch, Math.ceil(deps.concurrency / 4)));
    while (running) {
      let messages: ConsumerMessages | undefined;
      try {
        // A 5 s pull (heartbeat 2.5 s): after a nats-server restart the lost pull is noticed in
        // seconds, not after the 30 s default.
        messages = await consumer.consume({ max_messages: buffer, expires: 5000 });
        streams.add(messages);
        const watched = messages;
        void (async () => {
          for await (const s of watched.status()) {
            if (s.type === "consumer_not_found" || s.type === "consumer_deleted" || s.type === "stream_not_found")
              deps.onConsumerMissing?.(lane, s.type);
          }
        })().catch(() => {});
        for await (const msg of messages) {
          if (!running) break;
          const r = receive(msg);
          if (free(lane) <= 0) {
            held.add(r.handle);
            await waitForSlot(lane);
            held.delete(r.handle);
          }
          if (!running) {
            r.handle.nak(0);
            break;
          }
          inFlight++;
          const p = process(r).finally(() => {
            active.delete(p);
            releaseSlot();
          });
          active.add(p);
        }
      } catch (err) {
        if (running) {
          deps.log.warn({ lane, err: (err as Error).message }, "consume failed; retrying");
          await Bun.sleep(500);
        }
      } finally {
        if (messages) {
          streams.delete(messages);
          await messages.close().catch(() => {});
        }
      }
    }
  }

  const leaseTimer = { id: undefined as ReturnType<typeof setInterval> | undefined };
  const probeTimer = { id: undefined as ReturnType<typeof setInterval> | undefined };
  return {
    counters: deps.counters,
    inFlight: () => active.size,
    waiting: () => room.size(),
    start() {
      running = true;
      workingTimer.id = setInterval(
        () => {
          for (const m of held) m.working();
        },
        Math.max(500, Math.floor(deps.ackWaitMs / 3)),
      );
      for (const lane of LANES) loops.push(laneLoop(lane));
      leaseTimer.id = setInterval(
        () => {
          const ids = [...handling];
          deps.store
            .renewLeases(deps.workerId, ids, deps.timing.get().leaseMs)
            .catch((err: Error) => deps.log.warn({ err: err.message.slice(0, 200) }, "lease renewal failed"));
        },
        Math.max(500, Math.floor(deps.timing.get().leaseMs / 3)),
      );
      let probing = false;
      probeTimer.id = setInterval(() => {
        const key = deps.keys.current();
        const breaker = deps.keys.breaker(key.ref);
        if (probing || breaker.state() !== "half_open") return;
        probing = true;
        deps.provider
          .balance(key.value, hard.signal)
          .then((r) => breaker.probed(r.kind === "ok"))
          .catch(() => breaker.probed(false))
          .finally(() => (probing = false));
      }, 200);
    },
    async stop() {
      running = false;
      for (const w of slotWaiters.splice(0)) w();
      for (const m of streams) m.stop();
      await Promise.all(loops);
      const deadline = Bun.sleep(deps.drainTimeoutMs).then(() => "timeout" as const);
      const outcome = await Promise.race([Promise.all([...active]).then(() => "done" as const), deadline]);
      if (outcome === "timeout") {
        deps.log.warn({ inFlight: active.size }, "drain deadline passed; releasing in-flight tasks for redelivery");
        hard.abort(new Error("shutdown"));
        await Promise.all([...active]);
      }
      clearInterval(leaseTimer.id);
      clearInterval(probeTimer.id);
      clearInterval(workingTimer.id);
    },
  };
}
