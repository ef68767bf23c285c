// Weighted fair share of the provider threads among fair-share groups (docs/fair-share.md), in one
// solver: start-time fair queueing over thread-seconds. Each group has a finish tag, and the
// scheduler a virtual time V (the start tag of the task served last). A task of group g taking a
// unit of the plan starts at S = max(F_g, V) and moves F_g to S + (g's mean hold time) / weight;
// when the task ends, F_g is corrected by its real hold time. Units are handed to the waiter of the
// lowest max(F_g, V): while the plan is saturated the groups with work get thread-seconds in
// proportion to their weights; a group alone gets everything (nobody else waits); a group that had
// no work, or waited behind another queue, banks no credit (it competes from V, where the others
// are). Worker slots, the place a task holds before it waits for a unit, are shared by occupancy
// per weight (`slotRank`), so every group with work has tasks waiting for units. Pure: the clock
// is given; unit-tested in fair-share.test.ts.

/** The default group (clients in no group: the lanes' own subjects). */
const DEFAULT = "";

interface GroupState {
  /** Finish tag: where the group's next task starts, unless V is past it. */
  finish: number;
  /** Mean thread hold time (ms), the charge when a thread is taken. */
  meanHoldMs: number;
}

interface Held {
  group: string;
  at: number;
  charged: number;
}

export interface FairShareOptions {
  weightOf(group: string | undefined): number;
  now?: () => number;
  /** The charge of a thread before any has ended (ms). */
  initialHoldMs?: number;
}

export class FairScheduler {
  private readonly groups = new Map<string, GroupState>();
  private readonly held = new Map<string, Held>();
  /** Worker slots held, by group. */
  private readonly occupied = new Map<string, number>();
  private readonly now: () => number;
  /** The start tag of the task served last. */
  private virtualTime = 0;
  /** Thread-milliseconds ended, by group (what the bench and the metrics read). */
  readonly threadMs = new Map<string, number>();

  constructor(private readonly o: FairShareOptions) {
    this.now = o.now ?? Date.now;
  }

  private state(group: string | undefined): GroupState {
    const g = group ?? DEFAULT;
    let s = this.groups.get(g);
    if (!s) {
      // A new group's first tasks are charged at the others' mean hold (or the initial guess).
      const known = [...this.groups.values()];
      const mean = known.length
        ? known.reduce((n, x) => n + x.meanHoldMs, 0) / known.length
        : (this.o.initialHoldMs ?? 1000);
      this.groups.set(g, (s = { finish: 0, meanHoldMs: mean }));
    }
    return s;
  }

  private weight(group: string): number {
    return Math.max(1, this.o.weightOf(group === DEFAULT ? undefined : group));
  }

  /** The order in which waiters for a unit are served: lowest first (equals: first come). */
  rank(group: string | undefined): number {
    return Math.max(this.state(group).finish, this.virtualTime);
  }

  /** A thread taken for `taskId` of `group`: charged now at the group's mean hold time. */
  took(taskId: string, group: string | undefined): void {
    const g = group ?? DEFAULT;
    if (this.held.has(taskId)) return;
    const s = this.state(g);
    const start = Math.max(s.finish, this.virtualTime);
    const charged = s.meanHoldMs;
    s.finish = start + charged / this.weight(g);
    this.virtualTime = start;
    this.held.set(taskId, { group: g, at: this.now(), charged });
  }

  /** The thread of `taskId` ended: the charge corrected by the time it really held it. */
  ended(taskId: string): void {
    const h = this.held.get(taskId);
    if (!h) return;
    this.held.delete(taskId);
    const s = this.state(h.group);
    const heldMs = Math.max(0, this.now() - h.at);
    s.finish += (heldMs - h.charged) / this.weight(h.group);
    s.meanHoldMs = 0.8 * s.meanHoldMs + 0.2 * heldMs;
    this.threadMs.set(h.group, (this.threadMs.get(h.group) ?? 0) + heldMs);
  }

  /**
   * A worker slot held by a task of `group` (until the returned release): the slots are shared by
   * occupancy, so that every group with work has tasks waiting for the plan's units, where the
   * virtual times decide. Without this a group whose virtual time is lowest would take every freed
   * slot and the others would have no task left at the plan to be served.
   */
  occupy(group: string | undefined): () => void {
    const g = group ?? DEFAULT;
    this.occupied.set(g, (this.occupied.get(g) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.occupied.set(g, (this.occupied.get(g) ?? 1) - 1);
    };
  }

  /** The order in which freed worker slots are handed out: the group holding fewest per weight first. */
  slotRank(group: string | undefined): number {
    const g = group ?? DEFAULT;
    return (this.occupied.get(g) ?? 0) / this.weight(g);
  }

  /** Of `candidates`, the index of the one to serve first (lowest rank; the first of equals). */
  pick(candidates: ReadonlyArray<{ group: string | undefined }>): number {
    let best = -1;
    let bestRank = Number.POSITIVE_INFINITY;
    for (let i = 0; i < candidates.length; i++) {
      const r = this.rank(candidates[i]!.group);
      if (r < bestRank) {
        best = i;
        bestRank = r;
      }
    }
    return best;
  }
}
