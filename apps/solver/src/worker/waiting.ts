import type { ProviderReply } from "@pipeline/shared/provider";
import { afterPoll, beforePoll, observeReply, type Step } from "../domain/lifecycle.ts";
import type { Outcome } from "../domain/outcome.ts";
import type { HandlerDeps, Parked, Resume } from "./deps.ts";
import { completeSolved } from "./steps.ts";

/** How a wait ended: the task is finished, or handed back to the handler with the step to take. */
export type WaitResult = { kind: "done"; outcome: Outcome } | { kind: "resume"; resume: Resume };

export interface WaitingRoom {
  /**
   * Polls a parked task until its answer is there (then finishes it: completion, event) or a step the handler takes comes up (the provider gave it up or failed it, the key
   * stopped or rotated, the poll budget spent: handed back). Rejects on a hard stop or a failed
   * finish.
   */
  wait(p: Parked): Promise<WaitResult>;
  /** Tasks waiting now. */
  size(): number;
}

/**
 * The waiting phase of every task of a worker, and the only poll loop: records instead of
 * suspended handlers. A solver holding 10,000 tasks at a slow provider keeps 10,000 of these (a
 * few hundred bytes each) and the sleeps and polls in flight, not 10,000 handler call chains.
 * What to do with each reply is the domain's decision (`beforePoll`, `afterPoll`).
 */
export function createWaitingRoom(deps: HandlerDeps, signal: AbortSignal): WaitingRoom {
  const t = deps.timing;
  let waiting = 0;

  class Wait {
    /** Polls made in this wait (the budget). */
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

    handBack(step: Step): void {
      if (step.kind === "resubmit" && this.n >= t.maxPolls) deps.log.warn({ taskId: this.p.taskId, polls: this.n }, "poll budget spent; submitting anew");
      this.settle({ kind: "resume", resume: { parked: this.p, step } });
    }

    poll(): void {
      const { p } = this;
      const stop = beforePoll({ keyInUse: deps.keys.current().ref, keyOfTask: p.key.ref, polls: this.n, maxPolls: t.maxPolls });
      if (stop) return this.handBack(stop);
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
      if (reply.kind !== "ok" && reply.kind !== "not_ready") this.transportErrors++;
      const step = afterPoll(reply, { transportErrors: this.transportErrors, profile: deps.profile, limits: t });
      if (step.kind === "pollAgain") return this.sleepThenPoll(step.delayMs);
      if (step.kind === "complete" && reply.kind === "ok") return void this.finish(reply);
      if (step.kind === "resubmit") deps.log.info({ taskId: this.p.taskId, code: reply.kind === "error" ? reply.code : undefined }, "provider gave the task up; submitting anew");
      this.handBack(step);
    }

    async finish(reply: Extract<ProviderReply, { kind: "ok" }>): Promise<void> {
      const { p } = this;
      // Into the start cap for the finishing writes: thousands of answers arriving together
      // must not queue thousands of writes.
      if (deps.admission) await deps.admission.acquire();
      let outcome: Outcome;
      try {
        // The completion takes the task out of the plan's count (slots.ts) in the same write.
        outcome = await completeSolved(deps, p.taskId, p.type, p.polls, reply);
      } catch (err) {
        return this.abandon(err);
      } finally {
        deps.admission?.release();
      }
      this.settle({ kind: "done", outcome });
    }

    /** A hard stop or a failed write: the row keeps its provider id (and counts for the plan) until a later delivery finishes it. */
    abandon(err: unknown): void {
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
