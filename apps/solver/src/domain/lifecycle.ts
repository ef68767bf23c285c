// A task's lifecycle in the solver, as decisions: from what is known (the row, the provider's
// reply, the counts and the clock) to the next step. Pure: no I/O, no clock of its own. The
// worker applies a step in one place (worker/steps.ts); lifecycle.test.ts reads as the invariants.
import { classifyError, type ProviderProfile, type ProviderReply } from "@pipeline/shared/provider";
import type { Breaker } from "./breaker.ts";
import { ack, nak, type Outcome } from "./outcome.ts";
import { backoff } from "./timing.ts";

export interface LifecycleLimits {
  maxPolls: number;
  maxResubmits: number;
  maxAttempts: number;
  retryBaseMs: number;
  retryMaxMs: number;
  pollIntervalMs: number;
}

/** What the handler does next with a claimed task. */
export type Step =
  /** A provider task is known: wait for its answer (the waiting room). */
  | { kind: "park" }
  /** Store the provider id the provider just gave, then park. */
  | { kind: "checkpoint"; providerId: string }
  /** The answer is there: complete the task. */
  | { kind: "complete" }
  /** Poll again after a pause (not ready, a transport error, a retryable error code). */
  | { kind: "pollAgain"; delayMs: number }
  /** The provider gave the task up (or the poll budget ran out): a new provider task, same attempt. */
  | { kind: "resubmit" }
  /** The key in use changed since the provider task was made: forget it, submit anew with the new key. */
  | { kind: "rotated" }
  /** Release the task to be delivered again after `delayMs`; an attempt is spent. */
  | { kind: "retry"; code?: string; delayMs: number; why: string }
  /** The task cannot be solved (the provider said so): failed for good. */
  | { kind: "fail"; code: string }
  /** Out of attempts or past its deadline: failed, and a copy in the dead-letter queue. */
  | { kind: "deadLetter"; reason: string; code: string }
  /** The key cannot work (balance, ban, wrong key): the task waits, no attempt spent, breaker open. */
  | { kind: "keyStopped"; code: string };

/** The row fields the decisions read. */
export interface RowFacts {
  attempts: number;
  deadlineAt: Date | null;
  errorCode: string | null;
  /** The client's needBy (docs/scheduling.md): past it unsolved, the task fails with NEED_BY_PASSED. */
  needBy?: Date | null;
}

/** The code of a task whose needBy passed before its token was there. */
export const NEED_BY_PASSED = "NEED_BY_PASSED";

/** A task whose needBy has passed (unsolved): failed with NEED_BY_PASSED, never started or polled again. */
export function needByPassed(needByMs: number | null | undefined, nowMs: number): Step | undefined {
  if (needByMs === null || needByMs === undefined || nowMs <= needByMs) return undefined;
  return { kind: "deadLetter", reason: "needBy passed", code: NEED_BY_PASSED };
}

/**
 * Before a claim: a fenced region takes no task up (the claim would spend an attempt on a task it
 * may not submit); an open breaker keeps tasks in the queue. Undefined: take it.
 */
export function gate(o: {
  fenced: boolean;
  breaker: Pick<Breaker, "allows" | "state" | "retryInMs">;
  random: () => number;
}): { outcome: Outcome; counter: "fencedWaits" | "breakerWaits" } | undefined {
  if (o.fenced) return { outcome: nak(2000 + o.random() * 1000, "region fenced"), counter: "fencedWaits" };
  if (!o.breaker.allows())
    return {
      outcome: nak(o.breaker.retryInMs() + 200 + o.random() * 800, `breaker ${o.breaker.state()}`),
      counter: "breakerWaits",
    };
  return undefined;
}

export type ClaimAnswer<R> =
  | { kind: "claimed"; row: R }
  | { kind: "missing" }
  | { kind: "terminal"; row: { state: string } }
  | { kind: "busy"; leaseLeftMs: number };

/** What a claim that did not give us the row means for the message: never a provider call. */
export function afterClaim<R>(
  c: ClaimAnswer<R>,
): { row: R } | { outcome: Outcome; counter: "orphanMessages" | "dedupAcks" | "busyNaks" } {
  switch (c.kind) {
    case "claimed":
      return { row: c.row };
    case "missing":
      return { outcome: ack("no row for this task (never accepted)"), counter: "orphanMessages" };
    case "terminal":
      return { outcome: ack(`already ${c.row.state}`), counter: "dedupAcks" };
    case "busy":
      return { outcome: nak(c.leaseLeftMs + 500, "another worker holds the lease"), counter: "busyNaks" };
  }
}

/** A freshly claimed task past its deadline or its attempts is dead-lettered before any provider call. */
export function atStart(row: RowFacts, nowMs: number, l: Pick<LifecycleLimits, "maxAttempts">): Step | undefined {
  const needBy = needByPassed(row.needBy?.getTime(), nowMs);
  if (needBy) return needBy;
  if (row.deadlineAt !== null && nowMs > row.deadlineAt.getTime())
    return { kind: "deadLetter", reason: "deadline passed", code: row.errorCode ?? "DEADLINE_EXCEEDED" };
  if (row.attempts > l.maxAttempts)
    return { kind: "deadLetter", reason: "max attempts", code: row.errorCode ?? "MAX_ATTEMPTS" };
  return undefined;
}

/** A retry that would be the attempt too many, or land past the deadline, is a dead letter instead. */
export function retryOrDeadLetter(
  row: RowFacts,
  retry: Extract<Step, { kind: "retry" }>,
  nowMs: number,
  l: Pick<LifecycleLimits, "maxAttempts">,
): Step {
  if (row.attempts >= l.maxAttempts)
    return { kind: "deadLetter", reason: "max attempts", code: retry.code ?? "MAX_ATTEMPTS" };
  const needBy = needByPassed(row.needBy?.getTime(), nowMs + retry.delayMs);
  if (needBy) return needBy;
  if (row.deadlineAt !== null && nowMs + retry.delayMs > row.deadlineAt.getTime())
    return { kind: "deadLetter", reason: "deadline passed", code: retry.code ?? "DEADLINE_EXCEEDED" };
  return retry;
}

/** The backoff before the next delivery of a task on its `attempts`-th attempt. */
export const retryDelay = (attempts: number, l: Pick<LifecycleLimits, "retryBaseMs" | "retryMaxMs">) =>
  backoff(attempts, l.retryBaseMs, l.retryMaxMs);

/**
 * The provider's answer to a submit (in.php). `resubmits` counts the new provider tasks already
 * made in this delivery: past `maxResubmits` a resubmit-class error fails the task.
 */
export function afterSubmit(
  reply: ProviderReply,
  o: { attempts: number; resubmits: number; profile: ProviderProfile; limits: LifecycleLimits },
): Extract<Step, { kind: "checkpoint" | "resubmit" | "retry" | "fail" | "keyStopped" }> {
  if (reply.kind === "ok") return { kind: "checkpoint", providerId: reply.value };
  if (reply.kind === "error") {
    const cls = classifyError(reply.code, o.profile);
    if (cls === "task_fails") return { kind: "fail", code: reply.code };
    if (cls === "key_stops") return { kind: "keyStopped", code: reply.code };
    if (cls === "resubmit")
      return o.resubmits + 1 > o.limits.maxResubmits ? { kind: "fail", code: reply.code } : { kind: "resubmit" };
    return { kind: "retry", code: reply.code, delayMs: retryDelay(o.attempts, o.limits), why: `submit: ${reply.code}` };
  }
  if (reply.kind === "transport")
    return {
      kind: "retry",
      code: "TRANSPORT",
      delayMs: retryDelay(o.attempts, o.limits),
      why: `submit: ${reply.reason}`,
    };
  return { kind: "retry", delayMs: retryDelay(o.attempts, o.limits), why: "submit: not ready" };
}

/**
 * The provider's answer to a poll (res.php). `transportErrors` counts the failed polls of this wait
 * so far (this one included when it failed): their pauses grow.
 */
export function afterPoll(
  reply: ProviderReply,
  o: { transportErrors: number; profile: ProviderProfile; limits: LifecycleLimits },
): Extract<Step, { kind: "complete" | "pollAgain" | "resubmit" | "fail" | "keyStopped" }> {
  if (reply.kind === "ok") return { kind: "complete" };
  if (reply.kind === "not_ready") return { kind: "pollAgain", delayMs: o.limits.pollIntervalMs };
  if (reply.kind === "error") {
    const cls = classifyError(reply.code, o.profile);
    if (cls === "resubmit") return { kind: "resubmit" };
    if (cls === "task_fails") return { kind: "fail", code: reply.code };
    if (cls === "key_stops") return { kind: "keyStopped", code: reply.code };
  }
  // Retryable while polling: the same request again after a pause.
  return {
    kind: "pollAgain",
    delayMs: Math.max(o.limits.pollIntervalMs, backoff(o.transportErrors, o.limits.retryBaseMs, o.limits.retryMaxMs)),
  };
}

/** Before each poll: a rotated key or a spent poll budget ends the wait. Undefined: poll. */
export function beforePoll(o: {
  keyInUse: string;
  keyOfTask: string;
  polls: number;
  maxPolls: number;
}): Extract<Step, { kind: "rotated" | "resubmit" }> | undefined {
  if (o.keyInUse !== o.keyOfTask) return { kind: "rotated" };
  if (o.polls >= o.maxPolls) return { kind: "resubmit" };
  return undefined;
}

/** A resubmit past the delivery's budget of new provider tasks fails the task instead. */
export function resubmitOrFail(
  resubmits: number,
  l: Pick<LifecycleLimits, "maxResubmits">,
  code = "ERROR_CAPTCHA_UNSOLVABLE",
): Extract<Step, { kind: "resubmit" | "fail" }> {
  return resubmits + 1 > l.maxResubmits ? { kind: "fail", code } : { kind: "resubmit" };
}

/** The breaker's reading of a provider reply: the provider's health, per key. */
export function observeReply(
  breaker: Pick<Breaker, "failure" | "success" | "keyStopped">,
  profile: ProviderProfile,
  reply: ProviderReply,
): void {
  if (reply.kind === "transport") return breaker.failure();
  if (reply.kind !== "error") return breaker.success();
  const cls = classifyError(reply.code, profile);
  if (cls === "key_stops") breaker.keyStopped(reply.code);
  else if (cls === "retry") breaker.failure();
  else breaker.success();
}
