// One delivery of a task, from the message to its outcome or to the waiting room, and the new
// submit of a task the waiting room hands back.

import type { Unit } from "../adapters/slots.ts";
import type { Breaker } from "../domain/breaker.ts";
import { type ProviderKeyInUse, routeOrder } from "../domain/keyring.ts";
import { gate } from "../domain/lifecycle.ts";
import { nak } from "../domain/outcome.ts";
import { claimTask } from "./claim.ts";
import { counter, type Delivery, type Handled, type HandlerDeps, type Progress, type Resume } from "./deps.ts";
import { done, forgetProviderTask, type Solved } from "./steps.ts";
import { submitUntilKnown } from "./submit.ts";

export type { Delivery, Handled, HandlerDeps, Parked, Progress, Resume } from "./deps.ts";

/**
 * Takes one delivery of a task to its outcome, or parks it in the waiting room once the provider
 * has it (the room polls it and finishes it, or hands it back to `submitAnew`).
 * Guarantees: nothing calls the provider while the breaker is open, the region is fenced, or
 * without a provider slot (the fleet-wide thread limit); a task already final is acked without
 * calling the provider; a row holding a provider id is polled, never resubmitted; the provider id
 * is stored before the first poll; every write is guarded by the lease; a task past its deadline
 * or its attempts is dead-lettered.
 */
export async function handleTask(d: Delivery, deps: HandlerDeps, signal: AbortSignal): Promise<Handled> {
  // The accounts whose breaker lets calls through, cheapest for the type first (one account: it).
  const order = d.type ? routeOrder(deps.keys, d.type) : [deps.keys.current()];
  const first = order[0] ?? deps.keys.current();
  const random = deps.random ?? Math.random;
  const gated = () => {
    const wait = gate({ fenced: !!deps.fence && !deps.fence.allows(), breaker: deps.keys.breaker(first.ref), random });
    if (wait) counter(deps)(wait.counter);
    return wait?.outcome;
  };
  const closed = gated();
  if (closed) return closed;
  // With ADAPTIVE_CONCURRENCY: a place in the account's adaptive window first (provider-window.ts),
  // and the gate again after a wait for one (the breaker may have opened meanwhile).
  const routed = deps.window ? await enterWindow(deps, order.length > 0 ? order : [first], d, signal) : order;
  if (!routed) {
    counter(deps)("windowWaits");
    return nak(100 + random() * 400, "provider window full");
  }
  const closedSince = deps.window ? gated() : undefined;
  if (closedSince) return closedSince;
  // The start phase (slot, claim, submit, checkpoint) is capped.
  let admitted = false;
  const leave = () => {
    if (admitted) (admitted = false), deps.admission!.release();
  };
  try {
    // A new provider task needs a unit of the key's plan (slots.ts); a redelivered task whose row
    // holds a provider id has its provider task already (counted in `tasks`): such a task is taken
    // up without a unit (a dead solver's tasks are finished even while the plan is full of them).
    // The unit first, then the start phase: a task waiting for the plan holds no admission, so the
    // waiters for units are served by fair share (slot-budget.ts) without a first-come queue in front.
    const { key, unit } = await takeRouted(deps, routed.length > 0 ? routed : [first], d, signal);
    if (deps.admission) {
      await deps.admission.acquire(d.group);
      admitted = true;
    }
    deps.window?.hold(d.taskId, key.ref);
    const breaker = deps.keys.breaker(key.ref);
    if (!unit && !(await needsNoUnit(deps, d.taskId))) {
      counter(deps)("slotWaits");
      return nak(100 + random() * 400, "no provider slot free");
    }
    // Set once this delivery holds the task (claimed); the claim makes the task visible to the
    // plan's count (its submit marker or provider id).
    const progress: Progress = { claimed: false, ...(unit ? { unit } : {}) };
    try {
      return parkedOr(await solve(d, deps, key, breaker, leave, signal, progress));
    } finally {
      // Not claimed: no provider task was started with the unit, it is back.
      if (unit && !progress.claimed) unit.free();
    }
  } finally {
    leave();
  }
}

/** How long a task waits for a place in the adaptive window before its message is released (a short nak). */
const WINDOW_WAIT_MS = 10_000;

/**
 * A place in the adaptive window of the best account in `order` that has one free now, else the
 * first one freed at the best account (up to WINDOW_WAIT_MS). The accounts to route to, that one
 * first; undefined: none freed in time. A task whose row holds a provider id already is counted
 * without waiting (it is finished, not held back: its provider task runs anyway).
 */
async function enterWindow(
  deps: HandlerDeps,
  order: ProviderKeyInUse[],
  d: Delivery,
  signal: AbortSignal,
): Promise<ProviderKeyInUse[] | undefined> {
  const window = deps.window!;
  const first = order[0]!;
  const free = order.find((k) => !window.atLimit(k.ref));
  if (free && (await window.enter(free.ref, d.taskId, d.priority, 0)))
    return [free, ...order.filter((k) => k !== free)];
  if (await window.enter(first.ref, d.taskId, d.priority, WINDOW_WAIT_MS, signal)) return order;
  if (d.deliveries > 1 && (await needsNoUnit(deps, d.taskId))) {
    window.hold(d.taskId, first.ref);
    return order;
  }
  return undefined;
}

/**
 * A unit of the plan of the best account in `order` whose plan is not exhausted (waiting up to
 * SLOT_WAIT_MS for its next lease), passing over full ones unless they have a unit free now; all
 * full: a wait on the best. No unit: that account, for what follows.
 */
async function takeRouted(
  deps: HandlerDeps,
  order: ProviderKeyInUse[],
  d: Delivery,
  signal: AbortSignal,
): Promise<{ key: ProviderKeyInUse; unit: Unit | undefined }> {
  const waitMs = deps.timing.get().slotWaitMs;
  // A unit is charged to the task's fair-share group as it is handed over (domain/fair-share.ts),
  // so the next one handed at the same instant goes by the new ranks; worker.ts ends the charge.
  const share = deps.fair ? { group: d.group, took: () => deps.fair!.took(d.taskId, d.group) } : undefined;
  for (const key of order) {
    // An account whose plan is not exhausted gets the task (waiting for its next lease if need be);
    // a full one only if it has a unit free right now.
    if (!deps.slots.full(key.ref))
      return { key, unit: await deps.slots.take(key.ref, d.priority, waitMs, signal, share) };
    const unit = await deps.slots.take(key.ref, d.priority, 0, signal, share);
    if (unit) return { key, unit };
  }
  // Every account full: wait for the best one.
  return { key: order[0]!, unit: await deps.slots.take(order[0]!.ref, d.priority, waitMs, signal, share) };
}

/**
 * A task the waiting room handed back, its provider task given up: submitted anew with the key in
 * use (within the delivery's budget of new provider tasks), parked again once the provider has the
 * new one. Still claimed by this worker: no gate, no start cap, no unit of the plan (its submit
 * marker counts it).
 */
export async function submitAnew(deps: HandlerDeps, resume: Resume, signal: AbortSignal): Promise<Handled> {
  const { parked: p, row } = resume;
  // The account the waiting room chose (it may move a retry to another), if its key is still in use.
  const key = deps.keys.byRef(p.key.ref) ?? routeOrder(deps.keys, p.type)[0] ?? deps.keys.current();
  deps.window?.hold(p.taskId, key.ref);
  const task = {
    taskId: p.taskId,
    type: p.type,
    row,
    polls: p.polls,
    providerId: null,
    params: row.params,
    attempts: row.attempts,
    version: row.version,
  };
  return parkedOr(
    await submitUntilKnown({
      deps,
      task,
      key,
      breaker: deps.keys.breaker(key.ref),
      resubmits: { n: p.resubmits },
      leave: () => {},
      signal,
    }),
  );
}

const parkedOr = (r: Solved): Handled => (r.park ? { kind: "parked", parked: r.park } : r.outcome);

/** A task whose row is gone, final, or holds a provider id needs no unit to be taken up (a read, only when no unit is free). */
async function needsNoUnit(deps: HandlerDeps, taskId: string): Promise<boolean> {
  const row = await deps.store.get(taskId);
  return (
    !row || row.providerId !== null || (row.state !== "queued" && row.state !== "solving" && row.state !== "retrying")
  );
}

/** The claimed task: to the waiting room with a provider id, or to a written step. */
async function solve(
  d: Delivery,
  deps: HandlerDeps,
  routed: ProviderKeyInUse,
  breaker: Breaker,
  leave: () => void,
  signal: AbortSignal,
  progress: Progress,
): Promise<Solved> {
  const w = deps.workerId;
  const c = await claimTask(d, deps, breaker, signal, progress);
  if (!("task" in c)) return c;
  const { row, task } = c;
  // A provider task at another account whose key is in use (PROVIDERS) is polled there.
  const owner = row.providerKeyRef ? deps.keys.byRef(row.providerKeyRef) : undefined;
  const key = task.providerId && owner ? owner : routed;
  deps.window?.hold(d.taskId, key.ref);
  if (task.providerId && row.providerKeyRef && row.providerKeyRef !== key.ref) {
    // A provider task of a key no longer in use (rotated away, maybe leaked) is never polled with
    // it again: the task is submitted anew with the current key.
    if (
      !(await forgetProviderTask(
        deps,
        d.taskId,
        `provider key rotated (${row.providerKeyRef} -> ${key.ref}); submitting anew with the current key`,
      ))
    )
      return done(nak(deps.timing.get().leaseMs, "lease lost"));
    task.providerId = null;
    counter(deps)("keyRotationResubmits");
  } else if (task.providerId) counter(deps)("resumedPolls");
  if (task.providerId) {
    // Known to the provider (a stored id): the waiting room polls it.
    return {
      outcome: { kind: "ack", reason: "parked" },
      park: {
        taskId: d.taskId,
        type: task.type,
        providerId: task.providerId,
        key,
        polls: task.polls,
        resubmits: 0,
        firstDelayMs: 0,
        ...(row.needBy ? { needByMs: row.needBy.getTime() } : {}),
      },
    };
  }
  // The claim wrote this worker's submit marker (no provider id, no other worker's marker).
  const markedAtClaim = row.submitOwner === w && row.submitStartedAt !== null && row.providerId === null;
  return submitUntilKnown({
    deps,
    task: { ...task, params: row.params, attempts: row.attempts, version: row.version },
    key,
    breaker,
    resubmits: { n: 0 },
    leave,
    signal,
    markedAtClaim,
    needsUnit: !progress.unit && row.providerId === null,
  });
}
