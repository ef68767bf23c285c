import type { Consumer, ConsumerMessages, JsMsg } from "@nats-io/jetstream";
import { isConnectionError } from "@pipeline/shared/db";
import type { Logger } from "@pipeline/shared/log";
import { type Priority, TaskMessage } from "@pipeline/shared/schemas";
import { LANES } from "@pipeline/shared/subjects";
import { type Acknowledgeable, ackHandle, applyOutcome } from "../adapters/nats.ts";
import type { SolverStore } from "../adapters/pg.ts";
import type { ProviderClient } from "../adapters/provider.ts";
import { nak, type Outcome, term } from "../domain/outcome.ts";
import { createSlots, type SlotHold } from "./delivery-slots.ts";
import { type Handled, type HandlerDeps, handleTask, submitAnew } from "./handle-task.ts";
import { persist } from "./persist.ts";
import { createWaitingRoom, type WaitEnd, type WaitingRoom, type WaitResult } from "./waiting.ts";

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
  /** Deliveries in their start phase at once (not yet parked); default: `concurrency`. */
  intake?: number;
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

/** What the worker's lane loops, handlers and timers share. */
interface WorkerState {
  deps: WorkerDeps;
  running: boolean;
  /** Deliveries in flight (handled, or parked in the waiting room). */
  active: Set<Run>;
  /** Told when `active` empties (the drain). */
  idle: Array<() => void>;
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
    idle: [],
    handling: new Set(),
    held: new Set(),
    streams: new Set(),
    slots: createSlots(deps.concurrency, deps.highReserved, deps.fair, deps.intake),
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

/**
 * Starts one delivery (never two copies of one task at once); its `slot` is released when its
 * outcome is applied. A message that does not parse is terminated, a second copy nak'd, at once.
 */
function process(w: WorkerState, r: Received, group: string | undefined, slot: SlotHold): void {
  const { deps } = w;
  const msg = r.handle;
  let parsed: TaskMessage;
  try {
    parsed = TaskMessage.parse(r.body);
  } catch {
    deps.log.error({ seq: r.seq, subject: r.subject }, "unparseable task message; terminated");
    applyOutcome(msg, term("unparseable task message"));
    return slot.release();
  }
  if (w.handling.has(parsed.id)) {
    // A second copy of a message we are still handling (redelivered after AckWait ran out
    // while it waited in the pull buffer): never handle one task twice at once.
    applyOutcome(msg, nak(deps.timing.get().leaseMs, "already handling this task"));
    deps.metrics?.event("duplicateDeliveries");
    return slot.release();
  }
  w.handling.add(parsed.id);
  w.held.add(msg);
  const run = new Run(w, msg, parsed.id, slot);
  w.active.add(run);
  const delivery = { taskId: parsed.id, type: parsed.type, priority: parsed.priority, deliveries: r.deliveries, group };
  handleTask(delivery, deps, w.hard.signal).then(
    (h) => run.handled(h),
    (err) => run.error(err),
  );
}

/**
 * One delivery from its handler to its outcome applied to the message: a record whose methods
 * each step calls, not a chain of suspended calls. A parked task holds this, its Wait and its
 * Sleep (waiting.ts, sleeps.ts): at 10,000 tasks in flight the two async frames, the closures and
 * the promises each held before were most of the solver's memory per task. The waiting room
 * finishes a parked task (its step written there) or hands it back only to be submitted anew;
 * then it is parked again, or ends in the submit. A handler error is a nak, and the row is
 * released for the next worker.
 */
class Run implements WaitEnd {
  /** A handler error happened: the row is released when the delivery ends. */
  private failed = false;
  private ended = false;
  constructor(
    private readonly w: WorkerState,
    private readonly msg: Acknowledgeable,
    private readonly taskId: string,
    private readonly slot: SlotHold,
  ) {}

  /** The handler's (or a new submit's) result: parked (into the waiting room) or the outcome. */
  handled(h: Handled): void {
    if (h.kind !== "parked") return this.end(h);
    this.slot.started();
    try {
      this.w.room.wait(h.parked, this);
    } catch (err) {
      this.error(err);
    }
  }

  /** The waiting room's end of a wait: the outcome, or a new submit. */
  waited(r: WaitResult): void {
    if (r.kind === "done") return this.end(r.outcome);
    submitAnew(this.w.deps, r.resume, this.w.hard.signal).then(
      (h) => this.handled(h),
      (err) => this.error(err),
    );
  }

  error(err: unknown): void {
    // A stray error after the run ended (its outcome applied): nothing to retry, nothing to log.
    if (this.ended) return;
    this.failed = true;
    const { deps, hard } = this.w;
    if (hard.signal.aborted) return this.end(nak(0, "aborted by shutdown"));
    deps.log.error({ taskId: this.taskId, err: (err as Error).message?.slice(0, 300) }, "handler error; will retry");
    this.end(nak(Math.min(deps.timing.get().retryMaxMs, 2000), "handler error"));
  }

  private end(outcome: Outcome): void {
    // Each step above calls one of these once; a stray second call (a step that threw after
    // handing the task on) must not apply a second outcome or free the slot twice.
    if (this.ended) return;
    this.ended = true;
    const { deps } = this.w;
    this.w.handling.delete(this.taskId);
    // Its provider task ended (or none was made): its place in the adaptive window is free, and
    // its thread's time is charged to its fair-share group.
    deps.window?.leave(this.taskId);
    deps.fair?.ended(this.taskId);
    if (!this.failed) return this.apply(outcome);
    // Leave the row to the next worker (it resumes from the stored provider id), through a
    // database outage (persist.ts): the message's outcome waits for it (held, kept alive), so a
    // redelivery finds the row free. Given up, the lease, no longer renewed, runs out instead.
    persist(
      () => deps.store.release(this.taskId, deps.workerId, { polls: 0 }),
      deps.timing.get().leaseMs,
      deps.sleeper,
      this.w.hard.signal,
      { maxMs: 1000, retryable: isConnectionError },
    )
      .catch((err) =>
        deps.log.warn(
          { taskId: this.taskId, err: (err as Error).message?.slice(0, 300) },
          "row not released; its lease runs out instead",
        ),
      )
      .then(() => this.apply(outcome));
  }

  private apply(outcome: Outcome): void {
    const { deps } = this.w;
    try {
      applyOutcome(this.msg, outcome);
      deps.metrics?.outcome(outcome.kind);
      deps.log.debug({ taskId: this.taskId, outcome: outcome.kind, reason: outcome.reason }, "task handled");
    } finally {
      this.w.held.delete(this.msg);
      this.w.active.delete(this);
      this.slot.release();
      if (this.w.active.size === 0) for (const idle of this.w.idle.splice(0)) idle();
    }
  }
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
    if (got) got.release();
    r.handle.nak(0);
    return false;
  }
  process(w, r, group, got);
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
  const idle = () => new Promise<void>((resolve) => (active.size === 0 ? resolve() : w.idle.push(resolve)));
  const deadline = Bun.sleep(deps.drainTimeoutMs).then(() => "timeout" as const);
  const outcome = await Promise.race([idle().then(() => "done" as const), deadline]);
  if (outcome === "timeout") {
    deps.log.warn({ inFlight: active.size }, "drain deadline passed; releasing in-flight tasks for redelivery");
    w.hard.abort(new Error("shutdown"));
    await idle();
  }
}
