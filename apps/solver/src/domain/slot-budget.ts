// The fleet-wide provider thread plan without a row write per task (issue 13): a solver leases a
// block of units ("submit reservations") for a key, and spends them locally. Pure: the clock, the
// grant and the waits are given; the adapter (adapters/slots.ts) runs the leasing statement.
//
// What the fleet counts, at every lease (the grant statement):
//   in flight   = the region's tasks of the key with a provider task (solving or retrying with a
//                 provider id) or a recent submit marker: read from `tasks`, so a dead solver's
//                 provider tasks stay counted until a live one finishes them, whoever held them;
//   reserved    = the live blocks of the other solvers (their units not yet visible in `tasks`);
//   grant       = what this solver may start: threads - in flight - reserved (at least what it
//                 still carries, at most what it asks for; a fair share while another is starved).
// A unit becomes visible in `tasks` when the claim writes its submit marker; from then on the
// table counts it, and the next lease no longer carries it. Between the two it is counted twice
// (in the table and in this block), never zero times: the plan is never exceeded.
import type { Priority } from "@pipeline/shared/schemas";

/** One unit of the key's budget, held from before a submit until the task is visible in `tasks`. */
export interface Unit {
  readonly keyRef: string;
  /** The claim wrote the task's submit marker (or its provider id is stored): the table counts it now. */
  visible(): void;
  /** No provider task was started with it (claim refused, nothing to submit): the unit is back. */
  free(): void;
}

/** What the grant statement reads, and what the solver asks. */
export interface GrantFacts {
  threads: number;
  /** Provider tasks (and recent submit markers) of the key in `tasks`. */
  inFlight: number;
  /** Units of the other live blocks. */
  othersReserved: number;
  /** Live blocks, this one included. */
  blocks: number;
  /** Another live block asked for more than it got at its last lease. */
  othersStarved: boolean;
  /** Units this solver holds that the table does not show yet: the grant never goes below. */
  carried: number;
  /** What this solver asks for (carried + waiting + spare). */
  want: number;
}

/** The grant of one lease: pure, unit-tested. */
export function grantFor(f: GrantFacts): number {
  const free = f.threads - f.inFlight - f.othersReserved;
  const fair = Math.ceil(Math.max(0, f.threads - f.inFlight) / Math.max(1, f.blocks));
  const cap = f.othersStarved ? Math.min(free, fair) : free;
  return Math.max(f.carried, Math.min(f.want, cap), 0);
}

interface Waiter {
  resolve(u: UnitImpl | undefined): void;
  priority: Priority;
  /** The task's fair-share group (domain/fair-share.ts): within a lane, the lowest rank is served first. */
  group: string | undefined;
  /** Called as the unit is handed over, before the next waiter is chosen (its group's rank moves). */
  took: (() => void) | undefined;
}

/** A waiter's fair share: its group, and what to charge as it gets a unit. */
export interface UnitShare {
  group: string | undefined;
  took(): void;
}

class UnitImpl implements Unit {
  /** The budget's clock when the unit became visible (undefined: not yet). */
  visibleAt: number | undefined;
  live = true;
  /** Counted in the current lease's `consumed`. */
  counted = true;
  constructor(
    readonly keyRef: string,
    private readonly budget: KeyBudget,
  ) {}
  visible(): void {
    if (this.visibleAt === undefined) this.visibleAt = this.budget.tick();
  }
  free(): void {
    if (!this.live) return;
    this.live = false;
    this.budget.freed(this);
  }
}

const LANE_ORDER: Priority[] = ["high", "normal", "low"];

/**
 * One key's block in one solver: the grant of the last lease, the units spent from it, and the
 * tasks waiting for one (high lane first).
 */
export class KeyBudget {
  grant = 0;
  /** Units of the current lease in use (taken and not yet settled by a lease, nor freed). */
  consumed = 0;
  /** The grant may be spent until then (the lease's end, less a margin; 0: no lease yet). */
  validUntil = 0;
  /** A lease is in flight: no unit is handed out until it answers. */
  leasing = false;
  /** Units taken since the last lease (the spare the next one asks for). */
  takenSinceLease = 0;
  /** When a unit was last taken (or the budget made): a key unused for long is given up (key rotation). */
  lastTakeAt: number;
  private clock = 0;
  private readonly units = new Set<UnitImpl>();
  private readonly waiters: Record<Priority, Waiter[]> = { high: [], normal: [], low: [] };

  constructor(
    readonly keyRef: string,
    private readonly now: () => number,
    /** The fair-share order of the waiters of one lane (lowest first); absent: first come, first served. */
    private readonly rank?: (group: string | undefined) => number,
  ) {
    this.lastTakeAt = now();
  }

  /** Nothing carried, nothing waiting, nothing taken for `idleMs`: its block can be given up. */
  idle(idleMs: number): boolean {
    return this.waiting() === 0 && this.carried() === 0 && this.now() - this.lastTakeAt >= idleMs;
  }

  tick(): number {
    return ++this.clock;
  }

  waiting(): number {
    return this.waiters.high.length + this.waiters.normal.length + this.waiters.low.length;
  }

  /** Units held that the table does not show yet (what a lease sent now must carry). */
  carried(): number {
    let n = 0;
    for (const u of this.units) if (u.visibleAt === undefined) n++;
    return n;
  }

  /** A unit now, if the lease allows one. */
  tryTake(): Unit | undefined {
    if (this.leasing || this.consumed >= this.grant || this.now() >= this.validUntil) return undefined;
    return this.hand();
  }

  /** Waits for a unit (served in lane order as units come back or a lease grants more). */
  wait(priority: Priority, share?: UnitShare): { promise: Promise<Unit | undefined>; cancel(): void } {
    const { promise, resolve } = Promise.withResolvers<UnitImpl | undefined>();
    const w: Waiter = { resolve, priority, group: share?.group, took: share ? () => share.took() : undefined };
    this.waiters[priority].push(w);
    return {
      promise,
      cancel: () => {
        const q = this.waiters[priority];
        const i = q.indexOf(w);
        if (i >= 0) q.splice(i, 1), resolve(undefined);
      },
    };
  }

  /** Called as a lease is sent: returns the clock, for `leased`. */
  leaseSent(): number {
    this.leasing = true;
    return this.clock;
  }

  /**
   * A lease answered with `grant`, valid until `validUntil`: units visible before it was sent
   * are the table's now; the rest are carried in the new grant.
   */
  leased(sentAt: number, grant: number, validUntil: number): void {
    this.leasing = false;
    this.grant = grant;
    this.validUntil = validUntil;
    this.takenSinceLease = 0;
    let consumed = 0;
    for (const u of this.units) {
      if (u.visibleAt !== undefined && u.visibleAt <= sentAt) {
        u.counted = false;
        this.units.delete(u);
      } else consumed++;
    }
    this.consumed = consumed;
    this.serve();
  }

  /** A lease failed: the old grant stands until it runs out. */
  leaseFailed(): void {
    this.leasing = false;
    this.serve();
  }

  freed(u: UnitImpl): void {
    if (u.counted && this.units.delete(u)) this.consumed--;
    this.serve();
  }

  /** Hands units to waiters while the grant allows (high lane first). */
  serve(): void {
    for (const lane of LANE_ORDER) {
      const q = this.waiters[lane];
      while (q.length > 0) {
        if (this.leasing || this.consumed >= this.grant || this.now() >= this.validUntil) return;
        const w = q.splice(this.next(q), 1)[0]!;
        const u = this.hand();
        w.took?.();
        w.resolve(u);
      }
    }
  }

  /** The waiter of `q` to serve: the lowest fair-share rank (the first of equals), or the first. */
  private next(q: Waiter[]): number {
    if (!this.rank || q.length < 2) return 0;
    let best = 0;
    let bestRank = this.rank(q[0]!.group);
    for (let i = 1; i < q.length; i++) {
      const r = this.rank(q[i]!.group);
      if (r < bestRank) (best = i), (bestRank = r);
    }
    return best;
  }

  /** Ends every wait (stop). */
  endWaits(): void {
    for (const lane of LANE_ORDER) for (const w of this.waiters[lane].splice(0)) w.resolve(undefined);
  }

  private hand(): UnitImpl {
    const u = new UnitImpl(this.keyRef, this);
    this.units.add(u);
    this.consumed++;
    this.takenSinceLease++;
    this.lastTakeAt = this.now();
    return u;
  }
}

/**
 * What the next lease asks for: what it carries, the waiting tasks, and a spare of twice the
 * units taken since the last lease (so a steady demand is served by fewer leases, each one a row
 * write), none while another solver starves.
 */
export function wantFor(b: {
  carried: number;
  waiting: number;
  takenSinceLease: number;
  minSpare: number;
  othersStarved: boolean;
  threads: number;
}): number {
  const spare = b.othersStarved ? 0 : Math.max(b.minSpare, 2 * b.takenSinceLease);
  return Math.min(b.threads, b.carried + b.waiting + spare);
}
