// One delivery of a task, from the message to its outcome or to the waiting room.
import type { TaskRow } from "@pipeline/shared/db";
import type { Breaker } from "../domain/breaker.ts";
import type { ProviderKeyInUse } from "../domain/keyring.ts";
import { gate, resubmitOrFail } from "../domain/lifecycle.ts";
import { nak } from "../domain/outcome.ts";
import { claimTask, resumedRow } from "./claim.ts";
import { counter, type Delivery, type Handled, type HandlerDeps, type Progress, type Resume } from "./deps.ts";
import { done, type Solved, type TaskInHand, writeStep } from "./steps.ts";
import { submitUntilKnown } from "./submit.ts";

export type { Delivery, Handled, HandlerDeps, Parked, Progress, Resume } from "./deps.ts";

/**
 * Takes one delivery of a task to its outcome, or parks it in the waiting room once the provider
 * has it (the room polls it, finishes it, or hands it back here with the step it cannot take).
 * Guarantees: nothing calls the provider while the breaker is open, the region is fenced, or
 * without a provider slot (the fleet-wide thread limit); a task already final is acked without
 * calling the provider; a row holding a provider id is polled, never resubmitted; the provider id
 * is stored before the first poll; every write is guarded by the lease; a task past its deadline
 * or its attempts is dead-lettered.
 */
export async function handleTask(d: Delivery, deps: HandlerDeps, signal: AbortSignal, resume?: Resume): Promise<Handled> {
  const key = deps.keys.current();
  const breaker = deps.keys.breaker(key.ref);
  const random = deps.random ?? Math.random;
  if (!resume) {
    const wait = gate({ fenced: !!deps.fence && !deps.fence.allows(), breaker, random });
    if (wait) {
      counter(deps)(wait.counter);
      return wait.outcome;
    }
  }
  // The start phase (slot, claim, submit, checkpoint) is capped; a resumed task does not enter it.
  let admitted = false;
  const leave = () => {
    if (admitted) (admitted = false), deps.admission!.release();
  };
  try {
    if (deps.admission && !resume) {
      await deps.admission.acquire();
      admitted = true;
    }
    // A new provider task needs a unit of the key's plan (slots.ts); a resumed task has its
    // provider task already (counted in `tasks`), and so has a redelivered one whose row holds
    // a provider id: such a task is taken up without a unit (a dead solver's tasks are finished
    // even while the plan is full of them).
    const unit = resume ? undefined : await deps.slots.take(key.ref, d.priority, deps.timing.slotWaitMs, signal);
    if (!resume && !unit && !(await needsNoUnit(deps, d.taskId))) {
      counter(deps)("slotWaits");
      return nak(100 + random() * 400, "no provider slot free");
    }
    // Set once this delivery holds the task (claimed, or handed back by the waiting room); the
    // claim makes the task visible to the plan's count (its submit marker or provider id).
    const progress: Progress = { claimed: !!resume, ...(unit ? { unit } : {}) };
    try {
      const r = await solve(d, deps, key, breaker, leave, signal, progress, resume);
      if (r.park) return { kind: "parked", parked: r.park };
      return r.outcome;
    } finally {
      // Not claimed: no provider task was started with the unit, it is back.
      if (unit && !progress.claimed) unit.free();
    }
  } finally {
    leave();
  }
}

/** A task whose row is gone, final, or holds a provider id needs no unit to be taken up (a read, only when no unit is free). */
async function needsNoUnit(deps: HandlerDeps, taskId: string): Promise<boolean> {
  const row = await deps.store.get(taskId);
  return !row || row.providerId !== null || (row.state !== "queued" && row.state !== "solving" && row.state !== "retrying");
}

/** The claimed (or handed-back) task: to the waiting room with a provider id, or to a written step. */
async function solve(d: Delivery, deps: HandlerDeps, key: ProviderKeyInUse, breaker: Breaker, leave: () => void, signal: AbortSignal, progress: Progress, resume?: Resume): Promise<Solved> {
  const { store, timing: t, workerId: w } = deps;
  const bump = counter(deps);
  let row: TaskRow;
  let task: TaskInHand;
  if (resume) {
    // Handed back by the waiting room: still claimed by this worker, nothing to claim again.
    const r = await resumedRow(deps, d.taskId);
    if (!("row" in r)) return r;
    row = r.row;
    task = { taskId: d.taskId, type: resume.parked.type, row, polls: resume.parked.polls, providerId: row.providerId };
  } else {
    const c = await claimTask(d, deps, breaker, signal, progress);
    if (!("task" in c)) return c;
    ({ row, task } = c);
  }
  const resubmits = { n: resume?.parked.resubmits ?? 0 };
  const forget = async (why: string): Promise<boolean> => {
    if (!(await store.clearProviderId(d.taskId, w))) return false;
    deps.log.info({ taskId: d.taskId }, why);
    task.providerId = null;
    return true;
  };
  if (task.providerId && row.providerKeyRef && row.providerKeyRef !== key.ref) {
    // A provider task of a key no longer in use (rotated away, maybe leaked) is never polled with
    // it again: the task is submitted anew with the current key.
    if (!(await forget(`provider key rotated (${row.providerKeyRef} -> ${key.ref}); submitting anew with the current key`))) return done(nak(t.leaseMs, "lease lost"));
    bump("keyRotationResubmits");
  } else if (resume && resume.step.kind !== "rotated") {
    const step = resume.step.kind === "resubmit" ? resubmitOrFail(resubmits.n, t) : resume.step;
    if (step.kind === "fail" || step.kind === "keyStopped" || step.kind === "retry" || step.kind === "deadLetter") return writeStep(deps, task, step, breaker);
    if (step.kind === "resubmit") {
      if (!(await forget("the provider gave the task up (or the poll budget ran out); submitting anew"))) return done(nak(t.leaseMs, "lease lost"));
      resubmits.n++;
    }
  } else if (task.providerId && !resume) bump("resumedPolls");
  if (task.providerId) {
    // Known to the provider (a stored id, or a key back in use): the waiting room polls it.
    return { outcome: { kind: "ack", reason: "parked" }, park: { taskId: d.taskId, type: task.type, providerId: task.providerId, key, polls: task.polls, resubmits: resubmits.n, firstDelayMs: 0 } };
  }
  // The claim wrote this worker's submit marker (no provider id, no other worker's marker) unless
  // the task came back from the waiting room.
  const markedAtClaim = !resume && row.submitOwner === w && row.submitStartedAt !== null && row.providerId === null;
  return submitUntilKnown({ deps, task: { ...task, params: row.params, attempts: row.attempts, version: row.version }, key, breaker, resubmits, leave, signal, markedAtClaim, needsUnit: !resume && !progress.unit && row.providerId === null });
}
