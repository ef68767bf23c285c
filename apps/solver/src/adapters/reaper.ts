// Dead workers, found by their silence: a solver writes a heartbeat every 2 s; one whose last
// heartbeat is older than DEAD_AFTER_MS (3 missed beats by default) while it still holds task
// leases or provider slots is declared dead, and what it held is released at once: its task
// leases and slot leases end now, and its tasks are queued again so that a live solver takes
// them up (resuming their provider ids) without waiting for their AckWait. Every solver runs it
// (no single place to fail) and the statements make it safe to run concurrently: a lease is
// ended, and a task re-queued, by one reaper only.
//
// Faster for a killed process (issue 13, kill storms): its kernel closes its sockets at once, so
// its Postgres sessions end within milliseconds. A worker whose heartbeat is late (past
// `sessionsGoneAfterMs`, one missed beat) and that has no Postgres session left under its name is
// dead as well, without waiting for DEAD_AFTER_MS: the slots its tasks hold come back in a few
// seconds instead of staying held, idle, while the provider has long finished those tasks. Its
// heartbeat must be late too, so a live solver whose connections were only cut (a Postgres
// restart) and that still beats is never declared dead this way.
//
// Started again under the same name (WORKER_ID): each process start is an incarnation of its own
// (`<name>.<incarnation>`, @pipeline/shared/kv incarnation.ts), so its predecessor is another
// holder; one whose sessions are gone and whose name has an incarnation started after its last
// heartbeat is dead at once (superseded), and its heartbeat entry is removed.
//
// A worker that was only paused (SIGSTOP, a long GC, a stalled VM) and comes back finds its
// leases gone: its writes are guarded by lease owner, so it submits and completes nothing more
// of those tasks; an in.php call it had started is waited for by the taker-over (submit marker).
import type { JetStreamClient } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { type GroupOf, requeueMessage } from "@pipeline/shared/fair-share";
import { type Heartbeat, liveWorkers, type WorkersView, workerNameOf } from "@pipeline/shared/kv";
import { publishTaskMessage } from "@pipeline/shared/nats";
import type postgres from "postgres";

export interface ReaperDeps {
  sql: postgres.Sql;
  js: JetStreamClient;
  workers: KV;
  /**
   * The bucket as kept by this process's one watch (kv/workers-view.ts): read instead of listing
   * the bucket each round, which leaves a consumer on the server per call. Throws on a stale copy,
   * and the round is skipped.
   */
  view?: WorkersView;
  region: string;
  /** A worker silent this long is dead (default 6000: three missed beats). */
  deadAfterMs: number;
  /** The reaper's own worker id: never declared dead by itself. */
  self?: string;
  /**
   * The application_name prefix of a worker's Postgres sessions (the solver names its pools
   * `solver-<id>` and `solver-<id>-checkpoint`). With `sessionsGoneAfterMs`, a worker whose
   * heartbeat is that late and which has no session left is dead at once.
   */
  sessionName?: (workerId: string) => string;
  sessionsGoneAfterMs?: number;
  publishDeadlineMs?: number;
  /** The fair-share groups in use: a task goes back on its owner's group's subjects (absent: the lane's own). */
  groupOf?: GroupOf;
}

export interface Reaped {
  dead: string[];
  tasks: number;
  slots: number;
}

export async function reapDeadWorkers(d: ReaperDeps, now = Date.now()): Promise<Reaped> {
  const { workers } = d.view ? d.view.live(now, d.deadAfterMs) : await liveWorkers(d.workers, now, d.deadAfterMs);
  const alive = new Set(workers.map((w) => w.workerId));
  const holders = await d.sql<{ owner: string }[]>`
    select distinct lease_owner as owner from tasks where state = 'solving' and region = ${d.region} and lease_until > now() and lease_owner is not null
    union
    select distinct owner from provider_slot_blocks where lease_until > now()`;
  /** Dead by their closed sessions: their tasks are reaped without the quiet period below. */
  const gone = await goneWorkers(
    d,
    workers,
    holders.map((h) => h.owner),
    now,
  );
  for (const w of gone) alive.delete(w);
  if (d.self) alive.add(d.self);
  // Silent for deadAfterMs, and holding what it took at least that long ago (a solver that has
  // just started writes its first heartbeat right after it starts pulling).
  const dead = holders.map((h) => h.owner).filter((o) => !alive.has(o));
  if (dead.length === 0) return { dead: [], tasks: 0, slots: 0 };
  const quiet = `${d.deadAfterMs} milliseconds`;
  // A worker found dead by its silence may be one that has just started (its first heartbeat not
  // written yet): only what it has not touched for the quiet period is taken. One whose sessions
  // are gone had a heartbeat and is gone: everything it held is taken.
  const goneNow = dead.filter((o) => gone.has(o));
  const tasks = await d.sql<{ id: string; priority: string; type: string; owner: string; version: number }[]>`
    update tasks set lease_until = now()
    where state = 'solving' and region = ${d.region} and lease_owner = any(${dead}::text[]) and lease_until > now()
      and (updated_at < now() - ${quiet}::interval or lease_owner = any(${goneNow}::text[]))
    returning id, priority, type, owner, version`;
  // Its blocks of provider units (reservations): their units are free for the live solvers at once.
  // The provider tasks it started stay counted (from `tasks`) until a live solver finishes them.
  // A block is renewed every quarter of its lease: one silent for the quiet period is not a
  // starting solver's (its first heartbeat may not be written yet).
  const slots = await d.sql`
    delete from provider_slot_blocks
    where owner = any(${dead}::text[]) and (updated_at < now() - ${quiet}::interval or owner = any(${goneNow}::text[]))`;
  // A superseded incarnation's heartbeat entry goes with it: the fleet shows the process running.
  for (const w of gone) if (workers.some((x) => x.workerId === w)) await d.workers.delete(w).catch(() => {});
  for (const t of tasks) {
    const msg = requeueMessage(t, d.groupOf);
    await publishTaskMessage(d.js, d.region, msg, `${t.id}:reap:${t.version}`, d.publishDeadlineMs ?? 5000);
  }
  return { dead, tasks: tasks.length, slots: slots.count };
}

/**
 * Holders whose Postgres sessions are gone (none left under their application_name) and that are
 * either late (heartbeat older than `sessionsGoneAfterMs`) or superseded: a later incarnation of
 * the same name (WORKER_ID) started after their last heartbeat, so the process was started again
 * (a kill -9 and a restart). Both are dead at once; a process whose connections were only cut
 * keeps beating and is neither.
 */
async function goneWorkers(d: ReaperDeps, workers: Heartbeat[], holders: string[], now: number): Promise<Set<string>> {
  const gone = new Set<string>();
  if (!d.sessionName || d.sessionsGoneAfterMs === undefined) return gone;
  const beatOf = new Map(workers.map((w) => [w.workerId, Date.parse(w.at)]));
  const late = workers.filter((w) => now - Date.parse(w.at) > d.sessionsGoneAfterMs! && w.workerId !== d.self);
  const superseded = holders.filter(
    (h) =>
      h !== d.self &&
      workers.some(
        (s) =>
          s.workerId !== h &&
          (s.name ?? workerNameOf(s.workerId)) === workerNameOf(h) &&
          Date.parse(s.startedAt) > (beatOf.get(h) ?? 0),
      ),
  );
  const candidates = [...new Set([...late.map((w) => w.workerId), ...superseded])];
  if (candidates.length === 0) return gone;
  const rows = await d.sql<
    { name: string | null }[]
  >`select distinct application_name as name from pg_stat_activity where datname = current_database()`;
  const names = rows.map((r) => r.name ?? "");
  for (const id of candidates) {
    // Postgres keeps the first 63 bytes of an application_name.
    const name = d.sessionName(id);
    const exact = name.slice(0, 63);
    const prefix = `${name}-`.slice(0, 63);
    if (!names.some((x) => x === exact || x.startsWith(prefix))) gone.add(id);
  }
  return gone;
}
