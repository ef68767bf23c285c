// The claim phase: a delivery becomes a task in hand (its row leased to this worker), or an
// outcome without any provider call (no row, already final, leased by another, out of time).
import type { TaskRow } from "@pipeline/shared/db";
import type { TaskType } from "@pipeline/shared/schemas";
import type { Breaker } from "../domain/breaker.ts";
import { afterClaim, atStart } from "../domain/lifecycle.ts";
import { nak } from "../domain/outcome.ts";
import { counter, type Delivery, type HandlerDeps, type Progress } from "./deps.ts";
import { done, type Solved, type TaskInHand, writeStep } from "./steps.ts";

/** A claimed task and its row. */
export interface Claimed {
  task: TaskInHand;
  row: TaskRow;
}

/**
 * Claims the task's row (lease), dead-letters it when it is out of time or attempts, and takes
 * over a submit a presumed-dead holder had started (its provider id, once checkpointed) rather
 * than submitting the same captcha again. Says `solving` only when no submit follows.
 */
export async function claimTask(
  d: Delivery,
  deps: HandlerDeps,
  breaker: Breaker,
  signal: AbortSignal,
  progress?: Progress,
): Promise<Claimed | Solved> {
  const { store, workerId: w } = deps;
  const t = deps.timing.get();
  const bump = counter(deps);
  const claimed = afterClaim(await store.claim(d.taskId, w, t.leaseMs));
  if ("outcome" in claimed) {
    bump(claimed.counter);
    return done(claimed.outcome);
  }
  const row = claimed.row;
  if (progress) {
    progress.claimed = true;
    // The row counts for the plan now (its submit marker, or a provider id it had already, which
    // needed no new unit: that one is back at once).
    if (row.providerId !== null) progress.unit?.free();
    else progress.unit?.visible();
  }
  if (d.deliveries > 1) bump("redeliveries");
  const task: TaskInHand = { taskId: d.taskId, type: row.type as TaskType, row, polls: 0, providerId: row.providerId };
  const late = atStart(row, Date.now(), t);
  if (late?.kind === "deadLetter") return writeStep(deps, task, late, breaker);

  // A previous holder presumed dead (its lease ran out) may be alive and mid-submit: wait for its
  // checkpoint rather than submit the same captcha a second time.
  if (!task.providerId && row.submitStartedAt && row.submitOwner !== w) {
    const graceEnd = row.submitStartedAt.getTime() + t.providerTimeoutMs + 1000;
    while (!task.providerId && Date.now() < graceEnd) {
      await deps.sleeper.sleep(200, signal);
      const now = await store.get(d.taskId);
      if (!now || now.leaseOwner !== w || now.state !== "solving")
        return done(nak(t.leaseMs, "no longer ours while waiting for a started submit"));
      if (now.providerId) {
        task.providerId = now.providerId;
        bump("adoptedSubmits");
      } else if (!now.submitStartedAt) break; // that submit created nothing
    }
  }
  // A task about to be submitted says `solving` with its `submitted` event (one event, not two:
  // docs/design-choices.md, "One event for the claim and the submit"); one resumed from its
  // provider id has no submit ahead, so it says it now.
  if (task.providerId) await publishSolving(deps, task, row);
  return { task, row };
}

/** The `solving` event: the worker holding the task and the attempt (the claim's version). */
function publishSolving(deps: HandlerDeps, task: TaskInHand, row: TaskRow): Promise<void> {
  return deps.events.publish({
    taskId: task.taskId,
    kind: "solving",
    state: "solving",
    version: row.version,
    data: { worker: deps.workerId, attempt: row.attempts },
  });
}
