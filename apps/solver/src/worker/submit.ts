// The submit phase: in.php until the provider has a task for us, its id checkpointed before
// anything else happens (losing it would mean paying twice), then the task is parked.
import { toProviderParams } from "@pipeline/shared/provider";
import type { TaskSpec } from "@pipeline/shared/schemas";
import type { Breaker } from "../domain/breaker.ts";
import type { ProviderKeyInUse } from "../domain/keyring.ts";
import { afterSubmit, observeReply } from "../domain/lifecycle.ts";
import { nak } from "../domain/outcome.ts";
import { firstPollDelay } from "../domain/timing.ts";
import type { HandlerDeps } from "./deps.ts";
import { persist } from "./persist.ts";
import { done, type Solved, type TaskInHand, writeStep } from "./steps.ts";

export interface SubmitContext {
  deps: HandlerDeps;
  task: TaskInHand & { params: unknown; attempts: number; version: number };
  key: ProviderKeyInUse;
  breaker: Breaker;
  /** New provider tasks made in this delivery so far; counted up here. */
  resubmits: { n: number };
  /** The task leaves the start cap once the provider has it. */
  leave(): void;
  /** The claim wrote this worker's submit marker (claim and marker in one write): the first submit needs no `beginSubmit`. */
  markedAtClaim?: boolean;
  /**
   * Taken up without a unit of the plan (its row had a provider id when looked at, and no longer
   * has at the claim): it gets one before it submits, or waits for a later delivery.
   */
  needsUnit?: boolean;
  signal: AbortSignal;
}

/**
 * Submits until the provider id is stored: then the task is parked (`park` set, the first poll
 * after the type's delay). Any other end (fenced, cancelled, failed, retry, key stopped) is a
 * written step. Never submits while the region is fenced or after the row stopped being ours.
 */
export async function submitUntilKnown(c: SubmitContext): Promise<Solved> {
  const { deps, task } = c;
  const { store, workerId: w } = deps;
  const taskId = task.taskId;
  let marked = c.markedAtClaim === true;
  if (c.needsUnit) {
    const refused = await takeUnit(c, marked);
    if (refused) return refused;
  }
  const t = deps.timing.get();
  for (;;) {
    // A fenced region (cut off from the witness, or its lease taken over) pays for nothing new.
    if (deps.fence && !deps.fence.allows()) {
      // The claim's marker says a submit is under way: a taker-over would wait for it in vain.
      if (marked) await store.endSubmit(taskId, w);
      return done(nak(2000, "region fenced: no new provider submissions"));
    }
    // Cancelled (or lease lost) since the claim: never submit afterwards. The first submit after a
    // claim that wrote the marker goes at once (the claim, a moment ago, was that check).
    if (!marked && !(await store.beginSubmit(taskId, w)))
      return done(nak(t.leaseMs, "no longer ours (cancelled or taken over)"));
    marked = false;
    const step = await submitOnce(c);
    const answeredAt = Date.now();
    if (step.kind === "resubmit") {
      c.resubmits.n++;
      continue;
    }
    if (step.kind !== "checkpoint") return writeStep(deps, task, step, c.breaker);
    return checkpointAndPark(c, step.providerId, t, answeredAt);
  }
}

/** A unit of the plan for a task taken up without one: undefined when it has one, else the nak (its marker cleared). */
async function takeUnit(c: SubmitContext, marked: boolean): Promise<Solved | undefined> {
  const { deps, task } = c;
  const unit = await deps.slots.take(c.key.ref, "high", 0);
  if (!unit) {
    if (marked) await deps.store.endSubmit(task.taskId, deps.workerId);
    return done(nak(500, "no provider slot free"));
  }
  unit.visible();
  return undefined;
}

/** One in.php call, its reply observed by the breaker (the marker cleared when no provider task was made); the domain's step. */
async function submitOnce(c: SubmitContext) {
  const { deps, task, key } = c;
  const taskId = task.taskId;
  deps.log.debug({ taskId, attempt: task.attempts, resubmits: c.resubmits.n }, "provider submit");
  const reply = await deps.provider.submit(
    toProviderParams({ type: task.type, params: task.params } as TaskSpec),
    key.value,
    c.signal,
  );
  observeReply(c.breaker, deps.profile, reply);
  deps.window?.observe(key.ref, reply);
  if (reply.kind !== "ok") await deps.store.endSubmit(taskId, deps.workerId);
  // A timed-out in.php may have created a provider task we will never hear of: the retry
  // then pays twice. Said at warn so an operator can count them.
  if (reply.kind === "transport")
    deps.log.warn({ taskId, reason: reply.reason }, "provider submit unanswered; the retry may pay twice");
  return afterSubmit(reply, {
    attempts: task.attempts,
    resubmits: c.resubmits.n,
    profile: deps.profile,
    limits: deps.timing.get(),
  });
}

/**
 * The provider id checkpointed (retried through a database outage), `submitted` published, the
 * task parked. Its first poll is due the type's delay after the provider's answer (`answeredAt`),
 * not after the checkpoint: the write's milliseconds are spent inside that wait, not added to it.
 */
async function checkpointAndPark(
  c: SubmitContext,
  pid: string,
  t: ReturnType<HandlerDeps["timing"]["get"]>,
  answeredAt: number,
): Promise<Solved> {
  const { deps, task, key } = c;
  const taskId = task.taskId;
  // The provider has the task now: losing this write means paying for it twice, so it is
  // retried through a database outage (for as long as a lease could have lasted, at least a minute).
  const cp = await persist(
    () => deps.store.setProviderId(taskId, deps.workerId, pid, key.ref),
    Math.max(60_000, t.leaseMs * 2),
    deps.sleeper,
    c.signal,
  );
  deps.log.debug({ taskId, written: cp.written, stillOwner: cp.stillOwner }, "provider id checkpointed");
  // Taken over: the new holder polls the provider id (once its lease runs out, if this one wrote
  // it). Held by nobody (a row back from a snapshot): the next delivery claims it and polls now.
  if (!cp.stillOwner)
    return done(
      cp.unheld
        ? nak(500, "row back without this worker's claim; the next delivery polls")
        : nak(t.leaseMs, "lease lost after submit; the new holder polls"),
    );
  task.providerId = pid;
  // Also the claim's event (no `solving` before it): who holds the task, which attempt.
  await deps.events.publish({
    taskId,
    kind: "submitted",
    state: "solving",
    version: task.version,
    data: { providerId: pid, keyRef: key.ref, worker: deps.workerId, attempt: task.attempts },
  });
  c.leave();
  return {
    outcome: { kind: "ack", reason: "parked" },
    park: {
      taskId,
      type: task.type,
      providerId: pid,
      key,
      polls: task.polls,
      resubmits: c.resubmits.n,
      firstDelayMs: Math.max(0, firstPollDelay(task.type, t.firstPollMs) - (Date.now() - answeredAt)),
      ...(task.row.needBy ? { needByMs: task.row.needBy.getTime() } : {}),
    },
  };
}
