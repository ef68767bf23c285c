import type { Consumer, ConsumerMessages, JsMsg } from "@nats-io/jetstream";
import type { Logger } from "@pipeline/shared/log";
import { type Priority, TaskMessage } from "@pipeline/shared/schemas";
import { LANES } from "@pipeline/shared/subjects";
import { type Acknowledgeable, ackHandle, applyOutcome } from "../adapters/nats.ts";
import type { SolverStore } from "../adapters/pg.ts";
import type { ProviderClient } from "../adapters/provider.ts";
import { nak, type Outcome, term } from "../domain/outcome.ts";
import { type Handled, type HandlerDeps, handleTask, submitAnew } from "./handle-task.ts";
import { createWaitingRoom, type WaitingRoom, type WaitResult } from "./waiting.ts";

/** A fair-share group's consumer of a lane (docs/fair-share.md). */
export interface GroupSource {
  lane: Priority;
  group: string;
  consumer: Consumer;
}

/** The groups' consumers now, and the ones made later (a group added to the record). */
export interface GroupSources {
  current(): GroupSource[];
  onAdded(cb: (s: GroupSource) => void): void;
}

export interface WorkerDeps extends HandlerDeps {
  consumers: Record<Priority, Consumer>;
  /** Fair-share groups' consumers, pulled beside the lanes' own; served by `fair` (HandlerDeps). */
  groupSources?: GroupSources;
  store: SolverStore;
  log: Logger;
  concurrency: number;
  fetchBatch: number;
  ackWaitMs: number;
  /** How long a pull request lives at the server (domain/pull-expiry.ts); default 5 s. */
  pullExpiresMs?: number;
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

interface SlotWaiter {
  lane: Priority;
  group: string | undefined;
  resolve(got: (() => void) | false): void;
}

/** What the slots need of the fair-share scheduler: the order of the groups, and their counts. */
interface SlotShares {
  slotRank(group: string | undefined): number;
  occupy(group: string | undefined): () => void;
}

/**
 * The shared in-flight limit: normal and low may not use the reserved share, so a high task
 * always finds a slot quickly. A freed slot is handed to one waiter (no race between woken
 * ones): a high one first, then the group holding fewest slots per weight (`rank`: fair-share.ts
 * `slotRank`), then the first come (normal and low alike here: the low lane is not starved by a
 * normal backlog; the plan's units are served in lane order, slot-budget.ts).
 */
function createSlots(concurrency: number, highReserved: number, shares?: SlotShares) {
  let used = 0;
  const rank = shares ? (g: string | undefined) => shares.slotRank(g) : undefined;
  const waiters: SlotWaiter[] = [];
  const reserve = Math.min(concurrency - 1, Math.floor(concurrency * highReserved));
  const free = (lane: Priority) => concurrency - used - (lane === "high" ? 0 : reserve);
  const better = (a: SlotWaiter, b: SlotWaiter) =>
    (a.lane === "high") !== (b.lane === "high") ? a.lane === "high" : !!rank && rank(a.group) < rank(b.group);
  const serve = () => {
    while (waiters.length > 0) {
      let best = -1;
      for (let i = 0; i < waiters.length; i++)
        if (free(waiters[i]!.lane) > 0 && (best < 0 || better(waiters[i]!, waiters[best]!))) best = i;
      if (best < 0) return;
      const w = waiters.splice(best, 1)[0]!;
      w.resolve(grant(w.group));
    }
  };
  /** A slot taken for `group`, counted at once (the next hand-out sees it); its release frees it. */
  const grant = (group: string | undefined) => {
    used++;
    const vacate = shares?.occupy(group);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      vacate?.();
      used--;
      serve();
    };
  };
  return {
    /** Every waiter told to give up (stop). */
    wake() {
      for (const w of waiters.splice(0)) w.resolve(false);
    },
    /**
     * A slot of the lane, taken now or handed over when one frees: its release; false once
     * stopped.
     */
    acquire(
      lane: Priority,
      group: string | undefined,
      running: () => boolean,
    ): (() => void) | false | Promise<(() => void) | false> {
      if (free(lane) > 0 && waiters.length === 0) return grant(group);
      if (!running()) return false;
      const p = new Promise<(() => void) | false>((resolve) => waiters.push({ lane, group, resolve }));
      serve();
      return p;
    },
  };
}

/** What the worker's lane loops, handlers and timers share. */
interface WorkerState {
  deps: WorkerDeps;
  running: boolean;
  /** In-flight handlers. */
  active: Set<Promise<void>>;
  /** Task ids being handled now: only their leases are renewed. */
  handling: Set<string>;
  /**
   * Messages held now (handled, or waiting for a slot): one timer keeps them all alive with
   * `working()` every third of the AckWait, rather than a timer (and closure) per message.
   */
  held: Set<Acknowledgeable>;
  /** The lanes' pull subscriptions open now. */
  streams: Set<ConsumerMessages>;
  slots: ReturnType<typeof createSlots>;
  hard: AbortController;
  room: WaitingRoom;
}

/**
 * The solver loop: one fetch loop per lane, all sharing one in-flight limit. A message is
 * only fetched when a slot is free, so none waits in a local buffer while its AckWait runs.
 */
export function createWorker(deps: WorkerDeps): Worker {
  const hard = new AbortController();
  const w: WorkerState = {
    deps,
    running: false,
    active: new Set(),
    handling: new Set(),
    held: new Set(),
    streams: new Set(),
    slots: createSlots(deps.concurrency, deps.highReserved, deps.fair),
    hard,
    room: createWaitingRoom(deps, hard.signal),
  };
  const loops: Promise<void>[] = [];
  let stopTimers = () => {};
  return {
    counters: deps.counters,
    inFlight: () => w.active.size,
    waiting: () => w.room.size(),
    start() {
      w.running = true;
      const timers = [keepHeldAlive(w)];
      for (const lane of LANES) loops.push(laneLoop(w, lane, deps.consumers[lane]));
      for (const g of deps.groupSources?.current() ?? []) loops.push(laneLoop(w, g.lane, g.consumer, g.group));
      deps.groupSources?.onAdded((g) => {
        if (w.running) loops.push(laneLoop(w, g.lane, g.consumer, g.group));
      });
      timers.push(renewLeases(w), probeHalfOpenBreaker(w));
      stopTimers = () => {
        for (const t of timers) clearInterval(t);
      };
    },
    async stop() {
      w.running = false;
      w.slots.wake();
      deps.window?.endWaits();
      for (const m of w.streams) m.stop();
      await Promise.all(loops);
      await drain(w);
      stopTimers();
    },
  };
}

/** The delivery as the worker holds it: with `ackPublish`, an AckHandle on its reply subject instead of the message. */
function receive(msg: JsMsg, ackPublish: WorkerDeps["ackPublish"]): Received {
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
    ackPublish && typeof reply === "string" && reply.startsWith("$JS.ACK.") ? ackHandle(ackPublish, reply) : msg;
  return { handle, body, seq: msg.seq, subject: msg.subject, deliveries: msg.info.deliveryCount };
}

/** Handles one delivery to its outcome and applies it to the message; never two copies of one task at once. */
async function process(w: WorkerState, r: Received, group: string | undefined): Promise<void> {
  const { deps } = w;
  const msg = r.handle;
  w.held.add(msg);
  try {
    let parsed: TaskMessage;
    try {
      parsed = TaskMessage.parse(r.body);
    } catch {
      deps.log.error({ seq: r.seq, subject: r.subject }, "unparseable task message; terminated");
      applyOutcome(msg, term("unparseable task message"));
      return;
    }
    if (w.handling.has(parsed.id)) {
      // A second copy of a message we are still handling (redelivered after AckWait ran out
      // while it waited in the pull buffer): never handle one task twice at once.
      applyOutcome(msg, nak(deps.timing.get().leaseMs, "already handling this task"));
      deps.metrics?.event("duplicateDeliveries");
      return;
    }
    w.handling.add(parsed.id);
    const outcome = await handleToOutcome(w, parsed, r.deliveries, group);
    applyOutcome(msg, outcome);
    deps.metrics?.outcome(outcome.kind);
    deps.log.debug({ taskId: parsed.id, outcome: outcome.kind, reason: outcome.reason }, "task handled");
  } finally {
    w.held.delete(msg);
  }
}

/**
 * The task handled, through the waiting room while it is parked, to its outcome; a handler error
 * is a nak, and the row is released for the next worker.
 */
async function handleToOutcome(
  w: WorkerState,
  parsed: TaskMessage,
  deliveries: number,
  group: string | undefined,
): Promise<Outcome> {
  const { deps, hard } = w;
  let failed = false;
  const onError = (err: Error) => {
    failed = true;
    if (hard.signal.aborted) return nak(0, "aborted by shutdown");
    deps.log.error({ taskId: parsed.id, err: err.message.slice(0, 300) }, "handler error; will retry");
    return nak(Math.min(deps.timing.get().retryMaxMs, 2000), "handler error");
  };
  const delivery = { taskId: parsed.id, type: parsed.type, priority: parsed.priority, deliveries, group };
  let handled: Handled = await handleTask(delivery, deps, hard.signal).catch(onError);
  // A parked task waits in the waiting room, which finishes it (its step written there) or
  // hands it back only to be submitted anew; then it is parked again, or ends in the submit.
  while (handled.kind === "parked") {
    const waited: WaitResult | Outcome = await w.room.wait(handled.parked).catch(onError);
    if (waited.kind === "resume") handled = await submitAnew(deps, waited.resume, hard.signal).catch(onError);
    else handled = waited.kind === "done" ? waited.outcome : waited;
  }
  w.handling.delete(parsed.id);
  // Its provider task ended (or none was made): its place in the adaptive window is free, and
  // its thread's time is charged to its fair-share group.
  deps.window?.leave(parsed.id);
  deps.fair?.ended(parsed.id);
  if (failed) {
    // Leave the row to the next worker (it resumes from the stored provider id). If the
    // database is what failed, the lease, no longer renewed, runs out instead.
    await deps.store.release(parsed.id, deps.workerId, { polls: 0 }).catch(() => {});
  }
  return handled;
}

/**
 * One long-lived pull subscription per lane (nats.js `consume()`): repeated short `fetch()`es
 * lose a message now and then at the moment a pull expires, which then waits out a whole
 * AckWait. The lane's buffer is small, and a message waiting there for a slot is kept alive
 * with `working()`.
 */
async function laneLoop(w: WorkerState, lane: Priority, consumer: Consumer, group?: string): Promise<void> {
  const { deps } = w;
  const buffer = Math.max(1, Math.min(deps.fetchBatch, Math.ceil(deps.concurrency / 4)));
  while (w.running) {
    let messages: ConsumerMessages | undefined;
    try {
      // A pull of at most 5 s (heartbeat half that): after a nats-server restart the lost pull is
      // noticed in seconds, not after the 30 s default; shorter than DEAD_AFTER_MS less a beat, so
      // that a pull left behind by this solver cut off expires before its tasks are queued again.
      messages = await consumer.consume({ max_messages: buffer, expires: deps.pullExpiresMs ?? 5000 });
      w.streams.add(messages);
      watchConsumer(messages, (what) => deps.onConsumerMissing?.(lane, what));
      for await (const msg of messages) {
        if (!w.running) break;
        if (!(await dispatch(w, lane, group, receive(msg, deps.ackPublish)))) break;
      }
    } catch (err) {
      if (w.running) {
        deps.log.warn({ lane, err: (err as Error).message }, "consume failed; retrying");
        await Bun.sleep(500);
      }
    } finally {
      if (messages) {
        w.streams.delete(messages);
        await messages.close().catch(() => {});
      }
    }
  }
}

/** Tells `onMissing` when the subscription's consumer or stream is gone. */
function watchConsumer(messages: ConsumerMessages, onMissing: (what: string) => void): void {
  void (async () => {
    for await (const s of messages.status()) {
      if (s.type === "consumer_not_found" || s.type === "consumer_deleted" || s.type === "stream_not_found")
        onMissing(s.type);
    }
  })().catch(() => {});
}

/**
 * Waits for a slot of the lane (the message kept alive meanwhile), then starts handling the
 * delivery; false (the message nak'd) when the worker stopped meanwhile.
 */
async function dispatch(w: WorkerState, lane: Priority, group: string | undefined, r: Received): Promise<boolean> {
  let got = w.slots.acquire(lane, group, () => w.running);
  if (got instanceof Promise) {
    w.held.add(r.handle);
    got = await got;
    w.held.delete(r.handle);
  }
  if (!w.running || !got) {
    if (got) got();
    r.handle.nak(0);
    return false;
  }
  const release = got;
  const p = process(w, r, group).finally(() => {
    w.active.delete(p);
    release();
  });
  w.active.add(p);
  return true;
}

/** Every held message told `working()` every third of the AckWait. */
function keepHeldAlive(w: WorkerState): ReturnType<typeof setInterval> {
  return setInterval(
    () => {
      for (const m of w.held) m.working();
    },
    Math.max(500, Math.floor(w.deps.ackWaitMs / 3)),
  );
}

/** The leases of the tasks being handled renewed every third of the lease. */
function renewLeases(w: WorkerState): ReturnType<typeof setInterval> {
  const { deps } = w;
  return setInterval(
    () => {
      const ids = [...w.handling];
      deps.store
        .renewLeases(deps.workerId, ids, deps.timing.get().leaseMs)
        .catch((err: Error) => deps.log.warn({ err: err.message.slice(0, 200) }, "lease renewal failed"));
    },
    Math.max(500, Math.floor(deps.timing.get().leaseMs / 3)),
  );
}

/** The current key's breaker, when half open, probed with a balance call (one at a time). */
function probeHalfOpenBreaker(w: WorkerState): ReturnType<typeof setInterval> {
  const { deps } = w;
  let probing = false;
  return setInterval(() => {
    if (probing) return;
    // Every account's key in use (PROVIDERS): the first half-open one found.
    const key = deps.keys.accounts().find((k) => deps.keys.breaker(k.ref).state() === "half_open");
    if (!key) return;
    const breaker = deps.keys.breaker(key.ref);
    probing = true;
    deps.provider
      .balance(key.value, w.hard.signal)
      .then((r) => breaker.probed(r.kind === "ok"))
      .catch(() => breaker.probed(false))
      .finally(() => (probing = false));
  }, 200);
}

/** In-flight tasks finish until the drain deadline; then the rest are aborted (released for redelivery). */
async function drain(w: WorkerState): Promise<void> {
  const { deps, active } = w;
  const deadline = Bun.sleep(deps.drainTimeoutMs).then(() => "timeout" as const);
  const outcome = await Promise.race([Promise.all([...active]).then(() => "done" as const), deadline]);
  if (outcome === "timeout") {
    deps.log.warn({ inFlight: active.size }, "drain deadline passed; releasing in-flight tasks for redelivery");
    w.hard.abort(new Error("shutdown"));
    await Promise.all([...active]);
  }
}
