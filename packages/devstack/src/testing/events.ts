import { jetstream } from "@nats-io/jetstream";
import type { NatsConnection } from "@pipeline/shared/nats";
import { type TaskEvent, taskEventOf } from "@pipeline/shared/schemas";
import { eventSubject, eventSubjects, hookEventSubject, isFinalEventKind, streams } from "@pipeline/shared/subjects";

/** A task event as a test reads it back: the event, and when the stream stored it (ms). */
export type StoredEvent = TaskEvent & { storedAtMs: number };

/**
 * The task events a region's EVENTS stream holds for `ids`, in stream order (an ordered read from
 * the first message; a final kind is read from its hook subject too). `kinds` narrows the read to
 * those kinds. Messages that are not task events (alerts, breaker events) are skipped.
 */
export async function readTaskEvents(
  nc: NatsConnection,
  region: string,
  ids: Iterable<string>,
  kinds?: readonly TaskEvent["kind"][],
): Promise<StoredEvent[]> {
  const want = new Set(ids);
  const subjects = kinds
    ? kinds.flatMap((k) =>
        isFinalEventKind(k) ? [eventSubject(region, k), hookEventSubject(region, k)] : [eventSubject(region, k)],
      )
    : [eventSubjects(region)];
  const c = await jetstream(nc).consumers.get(streams.events(region), { filter_subjects: subjects });
  const out: StoredEvent[] = [];
  for (;;) {
    const m = await c.next({ expires: 1000 });
    if (!m) break;
    const e = taskEventOf(m);
    if (e && want.has(e.taskId)) out.push({ ...e, storedAtMs: m.info.timestampNanos / 1e6 });
  }
  return out;
}
