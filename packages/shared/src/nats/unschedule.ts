import type { PubAck } from "@nats-io/jetstream";
import { headers } from "@nats-io/transport-node";
import type { TaskMessage } from "../schemas/task.ts";
import { scheduleSubject, shardOf, taskSubject } from "../subjects.ts";
import type { Publisher } from "./pub-acks.ts";
import { publishWithRetry } from "./publish.ts";

/**
 * Removes a scheduled task's held message (publishScheduledTask) before its time: a cancelled
 * task's. nats-server 2.14+ cancels a message schedule atomically with a publish that names it
 * (`Nats-Scheduler: tasks.<region>.scheduled.<id>`, `Nats-Schedule-Next: purge`); that publish is
 * the task message on its lane, Nats-Msg-Id `<id>:unschedule`, which a solver takes up at once,
 * finds the row final and acks without a provider call. So no held message waits for its time,
 * and the app needs no stream administration (STREAM.PURGE is the administering side's). A
 * schedule already fired (or never made) is no error: the lane copy is acked the same way.
 */
export async function unscheduleTask(
  js: Publisher,
  region: string,
  msg: TaskMessage,
  deadlineMs?: number,
): Promise<PubAck> {
  const h = headers();
  h.set("Nats-Scheduler", scheduleSubject(region, msg.id));
  h.set("Nats-Schedule-Next", "purge");
  return publishWithRetry(
    js,
    taskSubject(region, msg.priority, shardOf(msg.id), msg.group),
    JSON.stringify(msg),
    `${msg.id}:unschedule`,
    deadlineMs,
    h,
  );
}
