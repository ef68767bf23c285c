// The one place a task's final or waiting steps are written, by the handler and the waiting room
// alike: the row (every write guarded by the lease), the event, and the message's outcome. The
// decisions are the domain's (lifecycle.ts).
import type { TaskRow } from "@pipeline/shared/db";
import type { ProviderReply } from "@pipeline/shared/provider";
import type { TaskType } from "@pipeline/shared/schemas";
import type { EventSink } from "../adapters/nats.ts";
import type { Breaker } from "../domain/breaker.ts";
import type { Charge } from "../domain/charge.ts";
import { type RowFacts, retryOrDeadLetter, type Step } from "../domain/lifecycle.ts";
import { ack, nak, type Outcome } from "../domain/outcome.ts";
import { tokenExpiry } from "../domain/timing.ts";
import { counter, type HandlerDeps, type Parked } from "./deps.ts";

/** Where a delivery ends: the message's outcome, and whether the provider still works on the task. */
export interface Solved {
  outcome: Outcome;
  /** Set when the task goes to the waiting room (`outcome` is then unused). */
  park?: Parked;
}

export const done = (outcome: Outcome): Solved => ({ outcome });

/** The task as the writer needs it; `polls` and `providerId` change as the delivery goes on. */
export interface TaskInHand {
  taskId: string;
  type: TaskType;
  row: RowFacts;
  polls: number;
  providerId: string | null;
}

type Final = Extract<Step, { kind: "retry" | "fail" | "deadLetter" | "keyStopped" }>;

/**
 * The event of a row just written by a lease-guarded release or fail: published only when the
 * write changed the row (`row` undefined: the task is no longer this worker's, nothing to say).
 * `kind` is the event's and the row's new state; `data` reads what it needs of the written row.
 * Every event a worker writes names it (`worker`): a claim that ends before a submit says
 * nothing else (no `solving` event before the `submitted` one), so this says who took it up.
 */
export async function publishWritten(
  events: EventSink,
  taskId: string,
  row: TaskRow | undefined,
  kind: "retrying" | "failed",
  data: (row: TaskRow) => Record<string, unknown>,
): Promise<void> {
  if (row) await events.publish({ taskId, kind, state: kind, version: row.version, data: data(row) });
}

/** Writes a final (for this delivery) step: retry, fail, dead letter, key stopped. */
export async function writeStep(deps: HandlerDeps, task: TaskInHand, step: Final, breaker: Breaker): Promise<Solved> {
  const { store, events, workerId: w } = deps;
  const { taskId, polls } = task;
  const s = step.kind === "retry" ? retryOrDeadLetter(task.row, step, Date.now(), deps.timing.get()) : step;
  switch (s.kind) {
    case "deadLetter": {
      const r = await store.fail(taskId, w, { code: s.code, message: `dead-lettered: ${s.reason}`, polls });
      if (r) {
        counter(deps)("deadLettered");
        await events.publish({
          taskId,
          kind: "failed",
          state: "failed",
          version: r.version,
          data: { code: s.code, deadLetter: s.reason, callback: r.callbackUrl !== null, worker: w },
        });
        await events.deadLetter(taskId, task.type, {
          reason: s.reason,
          code: s.code,
          attempts: r.attempts,
          redrives: r.redrives,
        });
      }
      return done(ack(`dead-lettered: ${s.reason}`));
    }
    case "retry": {
      const r = await store.release(taskId, w, { polls, ...(s.code ? { code: s.code } : {}) });
      await publishWritten(events, taskId, r, "retrying", () => ({ code: s.code, delayMs: s.delayMs, worker: w }));
      return done(nak(s.delayMs, s.why));
    }
    case "fail": {
      const r = await store.fail(taskId, w, { code: s.code, polls });
      await publishWritten(events, taskId, r, "failed", (row) => ({
        code: s.code,
        callback: row.callbackUrl !== null,
        worker: w,
      }));
      return done(ack(`failed: ${s.code}`));
    }
    case "keyStopped": {
      // A key-level error: the task waits (no attempt is spent on it), the breaker is open.
      deps.log.error({ taskId, code: s.code }, "provider key stopped; breaker open, task waits");
      const r = await store.release(taskId, w, { polls, code: s.code });
      await publishWritten(events, taskId, r, "retrying", () => ({ code: s.code, worker: w }));
      return done(nak(breaker.retryInMs() + 500, `key stopped: ${s.code}`));
    }
    default:
      throw new Error(`not a final step: ${s.kind}`);
  }
}

/** Gives the task's provider task up for a new one: its id cleared (lease-guarded); false when the row is no longer ours. */
export async function forgetProviderTask(deps: HandlerDeps, taskId: string, why: string): Promise<boolean> {
  if (!(await deps.store.clearProviderId(taskId, deps.workerId))) return false;
  deps.log.info({ taskId }, why);
  return true;
}

/**
 * The finish of a solved task: the completion (guarded by the lease; it also takes the task out
 * of the provider plan's count), the solve-time metric, the `completed` event. The waiting room
 * calls it when the answer is there. `charge`, the answer's cost, is booked in the ledger by the
 * same statement, whether or not the completion still was this worker's (the answer was read:
 * the provider charged), at most once per provider task.
 */
export async function completeSolved(
  deps: HandlerDeps,
  taskId: string,
  type: TaskType,
  polls: number,
  reply: Extract<ProviderReply, { kind: "ok" }>,
  charge?: Charge,
): Promise<Outcome> {
  const { store, events, workerId: w } = deps;
  const t = deps.timing.get();
  const userAgent = typeof reply.extra?.useragent === "string" ? reply.extra.useragent : undefined;
  const expiresAt = tokenExpiry(type, new Date(), t.tokenTtlMs);
  const r = await store.complete(taskId, w, {
    token: reply.value,
    ...(userAgent ? { userAgent } : {}),
    expiresAt,
    polls,
    ...(charge ? { charge } : {}),
  });
  if (!r) return nak(t.leaseMs, "lease lost before completion; the holder finishes");
  deps.metrics?.solved(type, (r.completedAt.getTime() - r.createdAt.getTime()) / 1000);
  // No token in the event (issue 16.3, retention): the row holds it while it is valid. The event
  // says one is stored; a database restored and replayed from EVENTS has the task completed
  // without its token (read as expired, TOKEN_UNAVAILABLE), as has the other region's replica.
  await events.publish({
    taskId,
    kind: "completed",
    state: "completed",
    version: r.version,
    // `callback`: whether the task has a callback URL, so the notifier reads no row for one without.
    data: {
      tokenStored: true,
      userAgent: userAgent ?? null,
      expiresAt: expiresAt?.toISOString() ?? null,
      completedAt: r.completedAt.toISOString(),
      providerId: r.providerId,
      callback: r.callback,
      // The ledger's charge, so a database restored and replayed from EVENTS keeps it (no key in it).
      ...(charge ? { charge } : {}),
    },
  });
  return ack("completed");
}
