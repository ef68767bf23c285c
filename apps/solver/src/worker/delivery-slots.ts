// The worker's in-flight limit and its start-phase intake, shared by its lanes and fair-share groups.
import type { Priority } from "@pipeline/shared/schemas";

/** A slot held by a delivery: `started()` once it is parked (its start phase over), `release()` at its end. */
export interface SlotHold {
  started(): void;
  release(): void;
}

interface SlotWaiter {
  lane: Priority;
  group: string | undefined;
  resolve(got: SlotHold | false): void;
}

/** What the slots need of the fair-share scheduler: the order of the groups, and their counts. */
interface SlotShares {
  slotRank(group: string | undefined): number;
  occupy(group: string | undefined): () => void;
}

/**
 * The shared in-flight limit: normal and low may not use the reserved share, so a high task
 * always finds a slot quickly. A freed slot is handed to one waiter (no race between woken
 * ones): a high one first, then the group holding fewest slots per weight (`rank`: fair-share.ts
 * `slotRank`), then the first come (normal and low alike here: the low lane is not starved by a
 * normal backlog; the plan's units are served in lane order, slot-budget.ts).
 *
 * `intake` bounds the deliveries in their start phase (not yet parked in the waiting room), with
 * the same high reserve: a solver allowed 10,000 in flight pulls them as fast as it can start
 * them, instead of 10,000 messages at once, each then waiting in the handler for a unit and the
 * start admission (a chain of calls, closures and promises apiece: most of its peak memory).
 * The waiting ones stay in the stream meanwhile, their AckWait not yet running.
 */
export function createSlots(concurrency: number, highReserved: number, shares?: SlotShares, intake = concurrency) {
  let used = 0;
  let starting = 0;
  const rank = shares ? (g: string | undefined) => shares.slotRank(g) : undefined;
  const waiters: SlotWaiter[] = [];
  const reserve = Math.min(concurrency - 1, Math.floor(concurrency * highReserved));
  const intakeReserve = Math.min(intake - 1, Math.floor(intake * highReserved));
  const free = (lane: Priority) =>
    lane === "high"
      ? Math.min(concurrency - used, intake - starting)
      : Math.min(concurrency - used - reserve, intake - starting - intakeReserve);
  const better = (a: SlotWaiter, b: SlotWaiter) =>
    (a.lane === "high") !== (b.lane === "high") ? a.lane === "high" : !!rank && rank(a.group) < rank(b.group);
  const serve = () => {
    while (waiters.length > 0) {
      let best = -1;
      for (let i = 0; i < waiters.length; i++)
        if (free(waiters[i]!.lane) > 0 && (best < 0 || better(waiters[i]!, waiters[best]!))) best = i;
      if (best < 0) return;
      const w = waiters.splice(best, 1)[0]!;
      w.resolve(grant(w.group));
    }
  };
  /** A slot taken for `group`, counted at once (the next hand-out sees it); its release frees it. */
  const grant = (group: string | undefined): SlotHold => {
    used++;
    starting++;
    const vacate = shares?.occupy(group);
    let inStart = true;
    let released = false;
    const started = () => {
      if (!inStart) return;
      inStart = false;
      starting--;
      serve();
    };
    return {
      started,
      release() {
        if (released) return;
        released = true;
        if (inStart) (inStart = false), starting--;
        vacate?.();
        used--;
        serve();
      },
    };
  };
  return {
    /** Every waiter told to give up (stop). */
    wake() {
      for (const w of waiters.splice(0)) w.resolve(false);
    },
    /** A slot of the lane, taken now or handed over when one frees; false once stopped. */
    acquire(
      lane: Priority,
      group: string | undefined,
      running: () => boolean,
    ): SlotHold | false | Promise<SlotHold | false> {
      if (free(lane) > 0 && waiters.length === 0) return grant(group);
      if (!running()) return false;
      const p = new Promise<SlotHold | false>((resolve) => waiters.push({ lane, group, resolve }));
      serve();
      return p;
    },
  };
}
