import type { PubAck } from "@nats-io/jetstream";
import { headers, type MsgHdrs } from "@nats-io/transport-node";
import type { TaskMessage } from "../schemas/task.ts";
import { scheduleSubject, shardOf, taskSubject } from "../subjects.ts";
import { isRetryablePublishError } from "./connection.ts";
import type { Publisher } from "./pub-acks.ts";

/**
 * Publishes with `Nats-Msg-Id` and waits for the PubAck, retrying retryable failures with the
 * same id until `deadlineMs` passes (JetStream deduplicates, so a retry never doubles a message).
 * `js`: a JetStreamClient, or on the hot paths a createPubAckPublisher (pub-acks.ts).
 */
export async function publishWithRetry(
  js: Publisher,
  subject: string,
  data: Uint8Array | string,
  msgID: string,
  deadlineMs = 10_000,
  hdrs?: MsgHdrs,
): Promise<PubAck> {
  const until = Date.now() + deadlineMs;
  let wait = 100;
  for (;;) {
    try {
      const timeout = Math.min(5000, Math.max(500, until - Date.now()));
      return await js.publish(subject, data, { msgID, timeout, ...(hdrs ? { headers: hdrs } : {}) });
    } catch (err) {
      if (!isRetryablePublishError(err) || Date.now() + wait > until) throw err;
      await Bun.sleep(wait);
      wait = Math.min(wait * 2, 1000);
    }
  }
}

/**
 * Publishes a task message on its subject, `tasks.<region>.<lane>.<shard>` (the lane its
 * priority, the shard its id's), as publishWithRetry does: Nats-Msg-Id = `msgID`, retried until
 * `deadlineMs`, resolved on the PubAck (`duplicate` when JetStream had the id already). The one
 * way a task is queued: the gateway's submit and redrive, the console's redrive, recovery's
 * sweep, rebuild and adoption, the solver's reaper.
 */
export async function publishTaskMessage(
  js: Publisher,
  region: string,
  msg: TaskMessage,
  msgID: string,
  deadlineMs?: number,
): Promise<PubAck> {
  return publishWithRetry(
    js,
    taskSubject(region, msg.priority, shardOf(msg.id), msg.group),
    JSON.stringify(msg),
    msgID,
    deadlineMs,
  );
}

/**
 * Holds a task message until `at` (a message schedule, nats-server 2.12+, on a stream with
 * `allow_msg_schedules`): stored on `tasks.<region>.scheduled.<id>` with `Nats-Schedule: @at <RFC
 * 3339>` and `Nats-Schedule-Target` its lane subject, where the server publishes the same body at
 * `at` (at once when `at` has passed) and removes the held one. Nats-Msg-Id `<id>:schedule`: a
 * second publish of the same schedule is deduplicated, and the lane message the server makes
 * carries no Nats-Msg-Id of its own, so a later republish under the task id is not dropped.
 */
export async function publishScheduledTask(
  js: Publisher,
  region: string,
  msg: TaskMessage,
  at: Date,
  deadlineMs?: number,
): Promise<PubAck> {
  const h = headers();
  h.set("Nats-Schedule", `@at ${at.toISOString()}`);
  h.set("Nats-Schedule-Target", taskSubject(region, msg.priority, shardOf(msg.id), msg.group));
  return publishWithRetry(
    js,
    scheduleSubject(region, msg.id),
    JSON.stringify(msg),
    `${msg.id}:schedule`,
    deadlineMs,
    h,
  );
}
