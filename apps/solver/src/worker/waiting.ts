// The waiting phase of a task: its provider task polled until the answer is there, and every end
// of the wait decided and written here, in steps.ts like the handler's (completed, failed, key
// stopped; nothing written once the row is no longer ours). Only a new submit goes back to the
// handler.
import type { TaskRow } from "@pipeline/shared/db";
import type { ProviderReply } from "@pipeline/shared/provider";
import { chargeOf } from "../domain/charge.ts";
import { routeOrder } from "../domain/keyring.ts";
import {
  afterPoll,
  beforePoll,
  NEED_BY_PASSED,
  needByPassed,
  observeReply,
  resubmitOrFail,
  type Step,
} from "../domain/lifecycle.ts";
import { ack, nak, type Outcome } from "../domain/outcome.ts";
import { counter, type HandlerDeps, type Parked, type Resume } from "./deps.ts";
import type { Wakeable } from "./sleeps.ts";
import { completeSolved, forgetProviderTask, type TaskInHand, writeStep } from "./steps.ts";

/**
 * How a wait ended: the task finished here (its step written; the outcome is the message's), or
 * handed back to the handler to be submitted anew (its provider task given up).
 */
export type WaitResult = { kind: "done"; outcome: Outcome } | { kind: "resume"; resume: Resume };

/** Who hears how a wait ended: a record's methods, so a parked task holds no promise for it. */
export interface WaitEnd {
  waited(r: WaitResult): void;
  /** A hard stop, or a failed read or write. */
  error(err: unknown): void;
}

export interface WaitingRoom {
  /**
   * Polls a parked task until its answer is there (then completes it) or the wait ends otherwise
   * (the provider gave it up or failed it, the key stopped or rotated, the poll budget spent):
   * then writes the step (fail, key stopped) or gives the provider task up and hands the task
   * back to be submitted anew (`end.waited`). `end.error` on a hard stop or a failed read or write.
   */
  wait(p: Parked, end: WaitEnd): void;
  /** Tasks waiting now. */
  size(): number;
}

/** A wait that ended without an answer: the step it left. */
type Unanswered = Extract<Step, { kind: "rotated" | "resubmit" | "fail" | "keyStopped" }>;

/**
 * The waiting phase of every task of a worker, and the only poll loop: records instead of
 * suspended handlers. A solver holding 10,000 tasks at a slow provider keeps 10,000 of these (a
 * few hundred bytes each) and the sleeps and polls in flight, not 10,000 handler call chains.
 * What to do with each reply is the domain's decision (`beforePoll`, `afterPoll`).
 */
export function createWaitingRoom(deps: HandlerDeps, signal: AbortSignal): WaitingRoom {
  const room: Room = { deps, signal, waiting: 0 };
  return {
    wait(p, end) {
      new Wait(room, p, end).sleepThenPoll(p.firstDelayMs);
    },
    size: () => room.waiting,
  };
}

/** What every wait of a worker shares: its deps, its hard stop, the count of waits. */
interface Room {
  deps: HandlerDeps;
  signal: AbortSignal;
  waiting: number;
}

/**
 * One wait of one parked task: sleeps and polls until its end, then tells the delivery (`end`).
 * Its pauses wake it through the sleeper (`wake`, `abort`): between polls a task holds this
 * record, its Parked and its Sleep.
 */
class Wait implements Wakeable {
  /** Polls made in this wait (the budget). */
  n = 0;
  transportErrors = 0;
  constructor(
    private readonly room: Room,
    readonly p: Parked,
    private readonly end: WaitEnd,
  ) {
    room.waiting++;
  }

  /** Whether this wait has ended (told `end`, or handed to the next wait): it ends once. */
  private over = false;

  private close(): boolean {
    if (this.over) return false;
    this.over = true;
    this.room.waiting--;
    return true;
  }

  settle(r: WaitResult): void {
    if (this.close()) this.end.waited(r);
  }

  fail(err: unknown): void {
    if (this.close()) this.end.error(err);
  }

  /** The same delivery waits again, a new wait (its own poll budget) for the provider task it still has. */
  again(p: Parked): void {
    if (this.close()) new Wait(this.room, p, this.end).sleepThenPoll(p.firstDelayMs);
  }

  sleepThenPoll(ms: number): void {
    this.room.deps.sleeper.after(ms, this.room.signal, this);
  }

  /** The pause is over (the sleeper's call). */
  wake(): void {
    this.poll();
  }

  /** The pause ended by a hard stop (the sleeper's call). */
  abort(reason: unknown): void {
    this.abandon(reason);
  }

  poll(): void {
    const { p } = this;
    const { deps, signal } = this.room;
    const stop = beforePoll({
      // Its account's key still in use (PROVIDERS' keys are fixed; the default one may rotate away).
      keyInUse: deps.keys.byRef(p.key.ref) ? p.key.ref : deps.keys.current().ref,
      keyOfTask: p.key.ref,
      polls: this.n,
      maxPolls: deps.timing.get().maxPolls,
    });
    if (stop) return void this.unanswered(stop);
    // needBy passed without an answer: the token would come too late to be of use (docs/scheduling.md).
    if (needByPassed(p.needByMs, Date.now())) return void this.unanswered({ kind: "fail", code: NEED_BY_PASSED });
    const reply = deps.poller
      ? deps.poller.poll(p.providerId, p.key.value, p.type, signal)
      : deps.provider.poll(p.providerId, p.key.value, signal);
    reply.then(
      (r) => this.onReply(r),
      (err) => this.abandon(err),
    );
  }

  onReply(reply: ProviderReply): void {
    const { deps } = this.room;
    this.n++;
    this.p.polls++;
    observeReply(deps.keys.breaker(this.p.key.ref), deps.profile, reply);
    if (reply.kind !== "ok" && reply.kind !== "not_ready") this.transportErrors++;
    const step = afterPoll(reply, {
      transportErrors: this.transportErrors,
      profile: deps.profile,
      limits: deps.timing.get(),
    });
    if (step.kind === "pollAgain") return this.sleepThenPoll(step.delayMs);
    if (step.kind === "complete")
      return reply.kind === "ok" ? void this.finish(reply) : this.abandon(new Error("an answer without a value"));
    if (step.kind === "resubmit")
      deps.log.info(
        { taskId: this.p.taskId, code: reply.kind === "error" ? reply.code : undefined },
        "provider gave the task up; submitting anew",
      );
    void this.unanswered(step);
  }

  async finish(reply: Extract<ProviderReply, { kind: "ok" }>): Promise<void> {
    const { p } = this;
    const { deps } = this.room;
    // Into the start cap for the finishing writes: thousands of answers arriving together
    // must not queue thousands of writes.
    if (deps.admission) await deps.admission.acquire();
    let outcome: Outcome;
    try {
      // The completion takes the task out of the plan's count (slots.ts) in the same write.
      // The answer was read: the provider charged for it (booked with the completion, once).
      const charge = deps.ledger
        ? chargeOf(deps.ledger, {
            ...(reply.extra ? { extra: reply.extra } : {}),
            type: p.type,
            providerTaskId: p.providerId,
            keyRef: p.key.ref,
          })
        : undefined;
      outcome = await completeSolved(deps, p.taskId, p.type, p.polls, reply, charge);
    } catch (err) {
      return this.abandon(err);
    } finally {
      deps.admission?.release();
    }
    this.settle({ kind: "done", outcome });
  }

  /** The wait ended without an answer: the step written here, the task parked again, or handed back for a new submit. */
  async unanswered(step: Unanswered): Promise<void> {
    const { deps } = this.room;
    if (step.kind === "resubmit" && this.n >= deps.timing.get().maxPolls)
      deps.log.warn({ taskId: this.p.taskId, polls: this.n }, "poll budget spent; submitting anew");
    let ended: WaitResult | { kind: "park"; parked: Parked };
    try {
      ended = await afterWait(deps, this.p, step);
    } catch (err) {
      return this.abandon(err);
    }
    if (ended.kind === "park") this.again(ended.parked);
    else this.settle(ended);
  }

  /** A hard stop or a failed read or write: the row keeps its provider id (and counts for the plan) until a later delivery finishes it. */
  abandon(err: unknown): void {
    this.fail(err);
  }
}

/**
 * The end of a wait without an answer, in the order the row allows: nothing once the row is no
 * longer this worker's; a provider task made with a key no longer in use is given up (never
 * polled with that key again) and the task submitted anew with the current one; a rotation the
 * row does not show parks the task again; a provider give-up becomes a new provider task while
 * the delivery's budget of resubmits lasts (else the task fails); fail and key stopped are
 * written (steps.ts). Every write is guarded by the lease.
 */
async function afterWait(
  deps: HandlerDeps,
  p: Parked,
  step: Unanswered,
): Promise<WaitResult | { kind: "park"; parked: Parked }> {
  // A new provider task goes to the best account now (a retry may move to another one).
  const key = routeOrder(deps.keys, p.type)[0] ?? deps.keys.current();
  const r = await rowAfterWait(deps, p.taskId);
  if ("outcome" in r) return { kind: "done", outcome: r.outcome };
  const { row } = r;
  const lost: WaitResult = { kind: "done", outcome: nak(deps.timing.get().leaseMs, "lease lost") };
  const submitAnew = (resubmits: number): WaitResult => ({
    kind: "resume",
    resume: { parked: { ...p, key, resubmits }, row },
  });
  const owner = row.providerKeyRef ? deps.keys.byRef(row.providerKeyRef) : undefined;
  if (row.providerId && row.providerKeyRef && !owner) {
    if (
      !(await forgetProviderTask(
        deps,
        p.taskId,
        `provider key rotated (${row.providerKeyRef} -> ${key.ref}); submitting anew with the current key`,
      ))
    )
      return lost;
    counter(deps)("keyRotationResubmits");
    return submitAnew(p.resubmits);
  }
  if (step.kind === "rotated")
    return row.providerId
      ? { kind: "park", parked: { ...p, providerId: row.providerId, key: owner ?? key, firstDelayMs: 0 } }
      : submitAnew(p.resubmits);
  const next = step.kind === "resubmit" ? resubmitOrFail(p.resubmits, deps.timing.get()) : step;
  if (next.kind === "resubmit") {
    if (
      !(await forgetProviderTask(
        deps,
        p.taskId,
        "the provider gave the task up (or the poll budget ran out); submitting anew",
      ))
    )
      return lost;
    return submitAnew(p.resubmits + 1);
  }
  const task: TaskInHand = { taskId: p.taskId, type: p.type, row, polls: p.polls, providerId: row.providerId };
  return { kind: "done", outcome: (await writeStep(deps, task, next, deps.keys.breaker(p.key.ref))).outcome };
}

/** The row of a task whose wait ended, if it is still this worker's to finish. */
async function rowAfterWait(deps: HandlerDeps, taskId: string): Promise<{ row: TaskRow } | { outcome: Outcome }> {
  const row = await deps.store.get(taskId);
  if (!row) return { outcome: ack("no row for this task any more") };
  if (row.state === "completed" || row.state === "failed" || row.state === "cancelled")
    return { outcome: ack(`already ${row.state}`) };
  if (row.state !== "solving" || row.leaseOwner !== deps.workerId)
    return { outcome: nak(deps.timing.get().leaseMs, "no longer ours after waiting") };
  return { row };
}
