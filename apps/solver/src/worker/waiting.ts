import type { ProviderReply } from "@pipeline/shared/provider";
import type { Outcome } from "../domain/outcome.ts";
import { backoff } from "../domain/timing.ts";
import { completeSolved, observeReply, type HandlerDeps, type Parked, type Resume } from "./handle-task.ts";

/** How a wait ended: the task is finished, or handed back to the handler with what it saw. */
export type WaitResult = { kind: "done"; outcome: Outcome } | { kind: "resume"; resume: Resume };

export interface WaitingRoom {
  /**
   * Polls a parked task until its answer is there (then finishes it: completion, event, slot
   * release) or something the handler decides comes up (an error reply, a rotated key, the poll
   * budget spent: handed back). Rejects on a hard stop or a failed finish, the slot parked.
   */
  wait(p: Parked): Promise<WaitResult>;
  /** Tasks waiting now. */
  size(): number;
}

/**
 * The waiting phase of every task of a worker, as records instead of suspended handlers: a
 * solver holding 10,000 tasks at a slow provider keeps 10,000 of these (a few hundred bytes
 * each) and the sleeps and polls in flight, not 10,000 handler call chains with their closures
 * and claimed rows. The logic is the handler's (`pollUntilDone` in handle-task.ts) for the
 * replies that keep a task waiting: not ready (again after the poll interval), transport errors
 * (again after a backoff), and the answer (finished here); everything else goes back to it.
 */
export function createWaitingRoom(deps: HandlerDeps, signal: AbortSignal): WaitingRoom {
  const t = deps.timing;
  let waiting = 0;

  class Wait {
    /** Polls made here (they count against the budget with the handler's). */
    n = 0;
    transportErrors = 0;
    constructor(
      readonly p: Parked,
      private readonly resolve: (r: WaitResult) => void,
      private readonly reject: (err: unknown) => void,
    ) {
      waiting++;
    }

    settle(r: WaitResult): void {
      waiting--;
      this.resolve(r);
    }

    fail(err: unknown): void {
      waiting--;
      this.reject(err);
    }

    sleepThenPoll(ms: number): void {
      deps.sleeper.sleep(ms, signal).then(
        () => this.poll(),
        (err) => this.abandon(err),
      );
    }

    handBack(reply?: ProviderReply): void {
      this.settle({ kind: "resume", resume: { parked: this.p, ...(reply ? { reply } : {}), pollsWaited: this.n } });
    }

    poll(): void {
      const { p } = this;
      if (deps.keys.current().ref !== p.key.ref || this.n >= t.maxPolls) return this.handBack();
      const reply = deps.poller ? deps.poller.poll(p.providerId, p.key.value, p.type, signal) : deps.provider.poll(p.providerId, p.key.value, signal);
      reply.then(
        (r) => this.onReply(r),
        (err) => this.abandon(err),
      );
    }

    onReply(reply: ProviderReply): void {
      this.n++;
      this.p.polls++;
      observeReply(deps.keys.breaker(this.p.key.ref), deps.profile, reply);
      if (reply.kind === "not_ready") return this.sleepThenPoll(t.pollIntervalMs);
      if (reply.kind === "transport") {
        this.transportErrors++;
        return this.sleepThenPoll(Math.max(t.pollIntervalMs, backoff(this.transportErrors, t.retryBaseMs, t.retryMaxMs)));
      }
      if (reply.kind === "ok") return void this.finish(reply);
      this.handBack(reply);
    }

    async finish(reply: Extract<ProviderReply, { kind: "ok" }>): Promise<void> {
      const { p } = this;
      // Into the start cap for the finishing writes, as the handler does: thousands of answers
      // arriving together must not queue thousands of writes.
      if (deps.admission) await deps.admission.acquire();
      let outcome: Outcome;
      try {
        outcome = await completeSolved(deps, p.taskId, p.type, p.polls, reply);
      } catch (err) {
        return this.abandon(err);
      } finally {
        deps.admission?.release();
      }
      await deps.slots.release(p.key.ref, p.slot, p.taskId).catch(() => {});
      this.settle({ kind: "done", outcome });
    }

    /** A hard stop or a failed write: the slot is parked (it frees itself once the provider task is gone). */
    async abandon(err: unknown): Promise<void> {
      await deps.slots.park(this.p.key.ref, this.p.slot, this.p.taskId).catch(() => {});
      this.fail(err);
    }
  }

  return {
    wait(p) {
      const { promise, resolve, reject } = Promise.withResolvers<WaitResult>();
      new Wait(p, resolve, reject).sleepThenPoll(p.firstDelayMs);
      return promise;
    },
    size: () => waiting,
  };
}
