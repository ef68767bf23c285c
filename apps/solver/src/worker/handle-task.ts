// One delivery of a task, from the message to its outcome or to the waiting room.
import type { TaskRow } from "@pipeline/shared/db";
import type { TakenSlot } from "../adapters/slots.ts";
import type { Breaker } from "../domain/breaker.ts";
import type { ProviderKeyInUse } from "../domain/keyring.ts";
import { gate, resubmitOrFail } from "../domain/lifecycle.ts";
import { nak } from "../domain/outcome.ts";
import { claimTask, resumedRow } from "./claim.ts";
import { counter, type Delivery, type Handled, type HandlerDeps, type Resume } from "./deps.ts";
import { done, type Solved, type TaskInHand, writeStep } from "./steps.ts";
import { submitUntilKnown } from "./submit.ts";

export type { Delivery, Handled, HandlerDeps, Parked, Resume } from "./deps.ts";

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
    // A resumed task still holds the slot it was parked with (under the key it was submitted with).
    const taken = resume ? undefined : await acquireSlot(d, deps, key.ref, signal);
    const slot = resume ? resume.parked.slot : taken?.slot;
    const slotKeyRef = resume ? resume.parked.key.ref : key.ref;
    if (slot === undefined) {
      counter(deps)("slotWaits");
      return nak(100 + random() * 400, "no provider slot free");
    }
    // On an exception (a hard stop) the slot is parked: it frees itself once the task has no
    // provider task in flight. A task parked in the waiting room keeps it.
    let keepSlot = true;
    let parked = false;
    // Set once this delivery holds the task (claimed, or handed back by the waiting room).
    const progress = { claimed: !!resume };
    try {
      const r = await solve(d, deps, key, breaker, leave, signal, progress, resume);
      if (r.park) {
        parked = true;
        return { kind: "parked", parked: { ...r.park, slot } };
      }
      keepSlot = r.providerTaskInFlight;
      return r.outcome;
    } finally {
      if (parked) {
        // the waiting room releases it
      } else if (taken?.resumed && !progress.claimed) {
        // The task held this slot before this delivery (its holder presumed dead, or alive with
        // its lease running): its provider task may be running, so the slot is given back as it
        // was, never freed by a delivery that did not get the task (issue 13: the plan's threads
        // were exceeded when it was).
        await deps.slots.restore(slotKeyRef, taken, deps.workerId, d.taskId).catch(() => {});
      } else if (keepSlot) await deps.slots.park(slotKeyRef, slot, d.taskId).catch(() => {});
      else await deps.slots.release(slotKeyRef, slot, d.taskId).catch(() => {});
    }
  } finally {
    leave();
  }
}

async function acquireSlot(d: Delivery, deps: HandlerDeps, keyRef: string, signal: AbortSignal): Promise<TakenSlot | undefined> {
  const until = Date.now() + deps.timing.slotWaitMs;
  // High-lane tasks look again sooner, so they win free slots under contention.
  const every = d.priority === "high" ? 20 : d.priority === "normal" ? 60 : 120;
  for (;;) {
    const s = await deps.slots.acquire(keyRef, deps.threads, deps.workerId, d.taskId, deps.timing.leaseMs);
    if (s !== undefined || Date.now() >= until) return s;
    await deps.sleeper.sleep(every + Math.random() * every, signal);
  }
}

/** The claimed (or handed-back) task: to the waiting room with a provider id, or to a written step. */
async function solve(d: Delivery, deps: HandlerDeps, key: ProviderKeyInUse, breaker: Breaker, leave: () => void, signal: AbortSignal, progress: { claimed: boolean }, resume?: Resume): Promise<Solved> {
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
    return { outcome: { kind: "ack", reason: "parked" }, providerTaskInFlight: true, park: { taskId: d.taskId, type: task.type, providerId: task.providerId, key, polls: task.polls, resubmits: resubmits.n, firstDelayMs: 0 } };
  }
  // The claim wrote this worker's submit marker (no provider id, no other worker's marker) unless
  // the task came back from the waiting room.
  const markedAtClaim = !resume && row.submitOwner === w && row.submitStartedAt !== null && row.providerId === null;
  return submitUntilKnown({ deps, task: { ...task, params: row.params, attempts: row.attempts, version: row.version }, key, breaker, resubmits, leave, signal, markedAtClaim });
}
