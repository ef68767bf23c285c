import type { JetStreamClient } from "@nats-io/jetstream";
import type { NatsConnection } from "@pipeline/shared/nats";
import { publishWithRetry } from "@pipeline/shared/nats";
import type { TaskEvent, TaskMessage } from "@pipeline/shared/schemas";
import { eventSubject, eventSubjects, shardOf, taskSubject } from "@pipeline/shared/subjects";

export interface TaskQueue {
  /** Publishes the task with Nats-Msg-Id = msgID (default: the task id) and resolves on the PubAck. */
  publishTask(msg: TaskMessage, msgID?: string): Promise<{ duplicate: boolean }>;
  publishEvent(ev: TaskEvent): Promise<void>;
  ping(): Promise<void>;
}

export function createTaskQueue(nc: NatsConnection, js: JetStreamClient, region: string, deadlineMs: number): TaskQueue {
  return {
    async publishTask(msg, msgID = msg.id) {
      const ack = await publishWithRetry(js, taskSubject(region, msg.priority, shardOf(msg.id)), JSON.stringify(msg), msgID, deadlineMs);
      return { duplicate: ack.duplicate };
    },
    async publishEvent(ev) {
      await publishWithRetry(js, eventSubject(region, ev.kind), JSON.stringify(ev), `${ev.taskId}:${ev.version}:${ev.kind}`, deadlineMs);
    },
    async ping() {
      if (nc.isClosed()) throw new Error("NATS connection closed");
      await nc.flush();
    },
  };
}

export interface TaskWatcher {
  /** Resolves when an event for the task arrives, or after `ms`. */
  waitForChange(taskId: string, ms: number): Promise<void>;
  close(): void;
}

/**
 * Wakes long-polls on task events: a plain subscription to `events.<region>.>` (JetStream
 * publishes reach core subscribers too). A missed event only costs the caller's re-check interval.
 */
export function createTaskWatcher(nc: NatsConnection, region: string): TaskWatcher {
  const waiters = new Map<string, Set<() => void>>();
  const sub = nc.subscribe(eventSubjects(region), {
    callback: (_err, m) => {
      if (waiters.size === 0) return;
      let id: unknown;
      try {
        id = (m.json() as { taskId?: unknown }).taskId;
      } catch {
        return;
      }
      const set = typeof id === "string" ? waiters.get(id) : undefined;
      if (set) for (const wake of [...set]) wake();
    },
  });
  return {
    waitForChange(taskId, ms) {
      return new Promise<void>((resolve) => {
        const set = waiters.get(taskId) ?? new Set();
        waiters.set(taskId, set);
        const done = () => {
          clearTimeout(timer);
          set.delete(done);
          if (set.size === 0) waiters.delete(taskId);
          resolve();
        };
        const timer = setTimeout(done, ms);
        set.add(done);
      });
    },
    close() {
      sub.unsubscribe();
    },
  };
}
