import type { Msg, NatsConnection, Subscription } from "@pipeline/shared/nats";
import {
  createPubAckPublisher,
  publishScheduledTask,
  publishTaskMessage,
  publishWithRetry,
  unscheduleTask,
} from "@pipeline/shared/nats";
import type { TaskEvent, TaskMessage } from "@pipeline/shared/schemas";
import { bodySubject, eventKindOf, eventSubjects, isFinalEventKind, subjectOfEvent } from "@pipeline/shared/subjects";
import type { BodyMessage } from "@pipeline/shared/tasks";

export interface TaskQueue {
  /** Publishes the task with Nats-Msg-Id = msgID (default: the task id) and resolves on the PubAck. */
  publishTask(msg: TaskMessage, msgID?: string): Promise<{ duplicate: boolean }>;
  /**
   * Holds the task message on TASKS until `at` (a message schedule: `tasks.<region>.scheduled.<id>`,
   * Nats-Msg-Id `<id>:schedule`), when the server puts it on its lane; resolves on the PubAck.
   */
  publishScheduled(msg: TaskMessage, at: Date): Promise<{ duplicate: boolean }>;
  /**
   * Removes a cancelled task's held message before its time (unscheduleTask: the schedule is
   * cancelled atomically with a lane copy that the solver acks, the row being final).
   */
  unschedule(msg: TaskMessage): Promise<void>;
  publishEvent(ev: TaskEvent): Promise<void>;
  /**
   * Publishes a task's image bodies on BODIES (`bodies.<region>.<task id>`, Nats-Msg-Id
   * `<task id>:body`) and resolves on the PubAck. BODIES is the administering side's (the
   * gateway verifies it at start); without it the publish fails (no PubAck).
   */
  publishBody(msg: BodyMessage): Promise<void>;
  ping(): Promise<void>;
}

export function createTaskQueue(nc: NatsConnection, region: string, deadlineMs: number): TaskQueue {
  // Every publish waits for its PubAck through one subscription (pub-acks.ts): two per task.
  const js = createPubAckPublisher(nc);
  return {
    async publishTask(msg, msgID = msg.id) {
      const ack = await publishTaskMessage(js, region, msg, msgID, deadlineMs);
      return { duplicate: ack.duplicate };
    },
    async publishScheduled(msg, at) {
      const ack = await publishScheduledTask(js, region, msg, at, deadlineMs);
      return { duplicate: ack.duplicate };
    },
    async unschedule(msg) {
      await unscheduleTask(js, region, msg, deadlineMs);
    },
    async publishEvent(ev) {
      await publishWithRetry(
        js,
        subjectOfEvent(region, ev),
        JSON.stringify(ev),
        `${ev.taskId}:${ev.version}:${ev.kind}`,
        deadlineMs,
      );
    },
    async publishBody(msg) {
      await publishWithRetry(
        js,
        bodySubject(region, msg.taskId),
        JSON.stringify(msg),
        `${msg.taskId}:body`,
        deadlineMs,
      );
    },
    async ping() {
      if (nc.isClosed()) throw new Error("NATS connection closed");
      await nc.flush();
    },
  };
}

export interface TaskWatch {
  /**
   * Resolves "event" at the task's next event (or at once when one came since the last call),
   * "timeout" after `ms`, "aborted" when `signal` aborts.
   */
  wait(ms: number, signal?: AbortSignal): Promise<"event" | "timeout" | "aborted">;
  close(): void;
}

export interface TaskWatcher {
  /**
   * Starts listening for the task's events (before its row is read: no event is missed in between).
   * `finalOnly` (a long-poll, which answers only once the task is final): woken only by a final
   * event (completed, failed, cancelled; the kind its subject names), not by those a task passes
   * through on its way there.
   */
  watch(taskId: string, o?: { finalOnly?: boolean }): TaskWatch;
  /** Open watches (the long-polls and streams held now). */
  size(): number;
  /** Whether the subscription to the region's events is open (only while someone waits, and for `lingerMs` after). */
  listening(): boolean;
  close(): void;
}

/**
 * The task an event is about. A task's events are published with Nats-Msg-Id
 * `<task id>:<version>:<kind>`: the id is read from that header, without parsing the body (an
 * `accepted` event carries the task's params; under long-polls every event of the region passes
 * here). Anything else (no such header: a fleet event, an `adopted` event) falls back to the body's
 * `taskId`.
 */
function taskIdOf(m: Msg): unknown {
  const msgId = m.headers?.get("Nats-Msg-Id") ?? "";
  if (msgId.length > 37 && msgId[36] === ":") return msgId.slice(0, 36);
  try {
    return (m.json() as { taskId?: unknown }).taskId;
  } catch {
    return undefined;
  }
}

/** A watch's wake function; a long-poll's is marked `finalOnly`. */
type Wake = (() => void) & { finalOnly?: boolean };

/**
 * Wakes long-polls on task events: a plain subscription to `events.<region>.>` (JetStream
 * publishes reach core subscribers too). A missed event only costs the caller's re-check interval.
 *
 * The subscription is open only while someone waits (and `lingerMs` after the last wait ended,
 * so back-to-back long-polls do not subscribe and unsubscribe each time): a gateway nobody
 * long-polls receives none of the region's four events per task (issue 13: every one was
 * delivered, framed and parsed for nobody). When it opens, the events stored before the server
 * had it are not seen: once the server has it (a flush, one round trip), every watch then open is
 * woken once and re-reads its task.
 */
export function createTaskWatcher(nc: NatsConnection, region: string, o: { lingerMs?: number } = {}): TaskWatcher {
  const lingerMs = o.lingerMs ?? 30_000;
  // Per task, its watches' wake functions; a long-poll's (finalOnly) are marked.
  const watches = new Map<string, Set<Wake>>();
  let open = 0;
  let sub: Subscription | undefined;
  let linger: ReturnType<typeof setTimeout> | undefined;
  const wakeAll = () => {
    for (const set of watches.values()) for (const fire of [...set]) fire();
  };
  const listen = () => {
    if (linger) clearTimeout(linger);
    linger = undefined;
    if (sub || nc.isClosed()) return;
    sub = nc.subscribe(eventSubjects(region), {
      callback: (_err, m) => {
        if (watches.size === 0) return;
        const id = taskIdOf(m);
        const set = typeof id === "string" ? watches.get(id) : undefined;
        if (!set) return;
        // A long-poll answers only once its task is final: the other events do not wake it.
        const final = isFinalEventKind(eventKindOf(m.subject));
        for (const fire of [...set]) if (final || !fire.finalOnly) fire();
      },
    });
    nc.flush().then(wakeAll, () => {});
  };
  const idle = () => {
    if (open > 0 || !sub || linger) return;
    linger = setTimeout(() => {
      linger = undefined;
      if (open > 0) return;
      sub?.unsubscribe();
      sub = undefined;
    }, lingerMs);
    linger.unref?.();
  };
  return {
    watch(taskId, wo = {}) {
      let fired = false;
      let wake: ((r: "event" | "timeout" | "aborted") => void) | undefined;
      const fire: Wake = () => {
        if (wake) wake("event");
        else fired = true;
      };
      fire.finalOnly = wo.finalOnly === true;
      const set = watches.get(taskId) ?? new Set();
      watches.set(taskId, set);
      set.add(fire);
      open++;
      listen();
      let closed = false;
      return {
        wait(ms, signal) {
          if (fired) {
            fired = false;
            return Promise.resolve("event");
          }
          if (signal?.aborted) return Promise.resolve("aborted");
          return new Promise((resolve) => {
            const done = (r: "event" | "timeout" | "aborted") => {
              clearTimeout(timer);
              signal?.removeEventListener("abort", onAbort);
              wake = undefined;
              resolve(r);
            };
            const onAbort = () => done("aborted");
            const timer = setTimeout(() => done("timeout"), ms);
            signal?.addEventListener("abort", onAbort);
            wake = done;
          });
        },
        close() {
          if (closed) return;
          closed = true;
          open--;
          set.delete(fire);
          if (set.size === 0) watches.delete(taskId);
          wake?.("aborted");
          idle();
        },
      };
    },
    size: () => open,
    listening: () => sub !== undefined,
    close() {
      if (linger) clearTimeout(linger);
      linger = undefined;
      sub?.unsubscribe();
      sub = undefined;
    },
  };
}
