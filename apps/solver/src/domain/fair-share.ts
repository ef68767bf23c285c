// Weighted fair share of the provider threads among fair-share groups (docs/fair-share.md), in one
// solver. Start-time fair queueing over thread-seconds: each group has a virtual time that grows by
// the thread time its tasks hold divided by its weight (charged when a thread is taken, at the
// group's measured mean hold time, and corrected by the real time when it ends). Whoever waits for
// a place (a worker slot, a unit of the plan) is served lowest virtual time first, so while the
// plan is saturated the groups with work get thread-seconds in proportion to their weights, and a
// group alone gets everything (nobody else waits). A group that had no work does not bank credit:
// when it has work again its virtual time is raised to the lowest of the groups that kept working.
// Pure: the clock is given; unit-tested in fair-share.test.ts.

/** The default group (clients in no group: the lanes' own subjects). */
const DEFAULT = "";

interface GroupState {
  /** Virtual time: thread-milliseconds divided by weight. */
  v: number;
  /** Tasks of the group waiting for a place or holding a thread. */
  backlog: number;
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
  private readonly now: () => number;
  /** Thread-milliseconds ended, by group (what the bench and the metrics read). */
  readonly threadMs = new Map<string, number>();

  constructor(private readonly o: FairShareOptions) {
    this.now = o.now ?? Date.now;
  }

  private state(group: string | undefined): GroupState {
    const g = group ?? DEFAULT;
    let s = this.groups.get(g);
    if (!s) this.groups.set(g, (s = { v: 0, backlog: 0, meanHoldMs: this.o.initialHoldMs ?? 1000 }));
    return s;
  }

  private weight(group: string): number {
    return Math.max(1, this.o.weightOf(group === DEFAULT ? undefined : group));
  }

  /** The lowest virtual time among the groups with work (excluding `except`), or undefined. */
  private floor(except: string): number | undefined {
    let min: number | undefined;
    for (const [g, s] of this.groups) if (g !== except && s.backlog > 0 && (min === undefined || s.v < min)) min = s.v;
    return min;
  }

  /** A task of `group` now waits for a place (until `done`): a group with no work before catches up to the floor. */
  arrived(group: string | undefined): () => void {
    const g = group ?? DEFAULT;
    const s = this.state(g);
    if (s.backlog === 0) {
      const floor = this.floor(g);
      if (floor !== undefined && s.v < floor) s.v = floor;
    }
    s.backlog++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      s.backlog--;
    };
  }

  /** The order in which waiters are served: lowest first. */
  rank(group: string | undefined): number {
    return this.state(group).v;
  }

  /** A thread taken for `taskId` of `group`: charged now at the group's mean hold time. */
  took(taskId: string, group: string | undefined): void {
    const g = group ?? DEFAULT;
    if (this.held.has(taskId)) return;
    const s = this.state(g);
    const charged = s.meanHoldMs / this.weight(g);
    s.v += charged;
    this.held.set(taskId, { group: g, at: this.now(), charged });
  }

  /** The thread of `taskId` ended: the charge corrected by the time it really held it. */
  ended(taskId: string): void {
    const h = this.held.get(taskId);
    if (!h) return;
    this.held.delete(taskId);
    const s = this.state(h.group);
    const heldMs = Math.max(0, this.now() - h.at);
    s.v += heldMs / this.weight(h.group) - h.charged;
    s.meanHoldMs = 0.8 * s.meanHoldMs + 0.2 * heldMs;
    this.threadMs.set(h.group, (this.threadMs.get(h.group) ?? 0) + heldMs);
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
