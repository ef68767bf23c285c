// The timelines a session watches (issue 34): one events cursor per (session, task), so the page's
// refresh every 2 s reads only what EVENTS gained since the last one, and nothing once the task is
// settled. Reads of one cursor run one after another (the refresh and a click may overlap).
import { type EventsCursor, newEventsCursor, type Timeline } from "./data.ts";

interface Watched {
  cursor: EventsCursor;
  /** The read in progress on this cursor, if any. */
  tail: Promise<unknown>;
}

export interface TimelineCache {
  /** The task's timeline read with this session's cursor for it (created on first use). */
  read(sid: string, id: string): Promise<Timeline | undefined>;
  /** Forgets a session's cursors (sign-out). */
  drop(sid: string): void;
  sessions(): number;
}

/**
 * Cursors per session, bounded: at most `tasksPerSession` tasks per session and `maxSessions`
 * sessions, the least recently used going first.
 */
export function timelineCache(
  read: (id: string, cursor: EventsCursor) => Promise<Timeline | undefined>,
  o: { maxSessions?: number; tasksPerSession?: number } = {},
): TimelineCache {
  const maxSessions = o.maxSessions ?? 1000;
  const tasksPerSession = o.tasksPerSession ?? 8;
  const bySession = new Map<string, Map<string, Watched>>();
  // A Map iterates in insertion order: re-inserting on use keeps the least recent first.
  const touch = <V>(m: Map<string, V>, k: string, v: V, max: number) => {
    m.delete(k);
    m.set(k, v);
    for (const old of m.keys()) {
      if (m.size <= max) break;
      m.delete(old);
    }
  };
  return {
    read(sid, id) {
      const tasks = bySession.get(sid) ?? new Map<string, Watched>();
      touch(bySession, sid, tasks, maxSessions);
      const w = tasks.get(id) ?? { cursor: newEventsCursor(), tail: Promise.resolve() };
      touch(tasks, id, w, tasksPerSession);
      const next = w.tail.then(() => read(id, w.cursor));
      w.tail = next.catch(() => {});
      return next;
    },
    drop: (sid) => void bySession.delete(sid),
    sessions: () => bySession.size,
  };
}
