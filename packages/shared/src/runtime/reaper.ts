// Dead workers, found by their silence: a solver writes a heartbeat every 2 s; one whose last
// heartbeat is older than DEAD_AFTER_MS (3 missed beats by default) while it still holds task
// leases or provider slots is declared dead, and what it held is released at once: its task
// leases and slot leases end now, and its tasks are queued again so that a live solver takes
// them up (resuming their provider ids) without waiting for their AckWait. Every solver runs it
// (no single place to fail) and the statements make it safe to run concurrently: a lease is
// ended, and a task re-queued, by one reaper only.
//
// A worker that was only paused (SIGSTOP, a long GC, a stalled VM) and comes back finds its
// leases gone: its writes are guarded by lease owner, so it submits and completes nothing more
// of those tasks; an in.php call it had started is waited for by the taker-over (submit marker).
import type { JetStreamClient } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import type postgres from "postgres";
import { publishWithRetry } from "../nats/publish.ts";
import type { Priority } from "../schemas/task-types.ts";
import { shardOf, taskSubject } from "../subjects.ts";
import { liveWorkers } from "./kv.ts";

export interface ReaperDeps {
  sql: postgres.Sql;
  js: JetStreamClient;
  workers: KV;
  region: string;
  /** A worker silent this long is dead (default 6000: three missed beats). */
  deadAfterMs: number;
  /** The reaper's own worker id: never declared dead by itself. */
  self?: string;
  publishDeadlineMs?: number;
}

export interface Reaped {
  dead: string[];
  tasks: number;
  slots: number;
}

export async function reapDeadWorkers(d: ReaperDeps, now = Date.now()): Promise<Reaped> {
  const { workers } = await liveWorkers(d.workers, now, d.deadAfterMs);
  const alive = new Set(workers.map((w) => w.workerId));
  if (d.self) alive.add(d.self);
  const holders = await d.sql<{ owner: string }[]>`
    select distinct lease_owner as owner from tasks where state = 'solving' and region = ${d.region} and lease_until > now() and lease_owner is not null
    union
    select distinct owner from provider_slots where lease_until > now() and owner is not null`;
  // Silent for deadAfterMs, and holding what it took at least that long ago (a solver that has
  // just started writes its first heartbeat right after it starts pulling).
  const dead = holders.map((h) => h.owner).filter((o) => !alive.has(o));
  if (dead.length === 0) return { dead: [], tasks: 0, slots: 0 };
  const quiet = `${d.deadAfterMs} milliseconds`;
  const tasks = await d.sql<{ id: string; priority: string; type: string; version: number }[]>`
    update tasks set lease_until = now()
    where state = 'solving' and region = ${d.region} and lease_owner = any(${dead}::text[]) and lease_until > now() and updated_at < now() - ${quiet}::interval
    returning id, priority, type, version`;
  const slots = await d.sql`
    update provider_slots set lease_until = now()
    where owner = any(${dead}::text[]) and lease_until > now()`;
  for (const t of tasks) {
    const body = JSON.stringify({ id: t.id, type: t.type, priority: t.priority });
    await publishWithRetry(d.js, taskSubject(d.region, t.priority as Priority, shardOf(t.id)), body, `${t.id}:reap:${t.version}`, d.publishDeadlineMs ?? 5000);
  }
  return { dead, tasks: tasks.length, slots: slots.count };
}
