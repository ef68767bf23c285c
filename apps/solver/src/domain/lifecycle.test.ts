import { describe, expect, test } from "bun:test";
import type { ProviderReply } from "@pipeline/shared/provider";
import { createBreaker } from "./breaker.ts";
import {
  afterClaim,
  afterPoll,
  afterSubmit,
  atStart,
  beforePoll,
  gate,
  type LifecycleLimits,
  observeReply,
  resubmitOrFail,
  retryOrDeadLetter,
} from "./lifecycle.ts";

const limits: LifecycleLimits = {
  maxPolls: 20,
  maxResubmits: 3,
  maxAttempts: 5,
  retryBaseMs: 1000,
  retryMaxMs: 60_000,
  pollIntervalMs: 5000,
};
const profile = "2captcha" as const;
const ok = (value: string): ProviderReply => ({ kind: "ok", value });
const err = (code: string): ProviderReply => ({ kind: "error", code });
const transport: ProviderReply = { kind: "transport", reason: "timeout" };
const notReady: ProviderReply = { kind: "not_ready" };
const row = (o: Partial<{ attempts: number; deadlineAt: Date | null; errorCode: string | null }> = {}) => ({
  attempts: 1,
  deadlineAt: null,
  errorCode: null,
  ...o,
});
const breaker = (allows: boolean) => ({
  allows: () => allows,
  state: () => (allows ? "closed" : "open") as never,
  retryInMs: () => 3000,
});

describe("before a claim", () => {
  test("a fenced region takes no task up: it waits 2-3 s in the queue", () => {
    const g = gate({ fenced: true, breaker: breaker(true), random: () => 0.5 });
    expect(g).toEqual({ outcome: { kind: "nak", delayMs: 2500, reason: "region fenced" }, counter: "fencedWaits" });
  });
  test("an open breaker keeps tasks in the queue until it may close", () => {
    const g = gate({ fenced: false, breaker: breaker(false), random: () => 0 });
    expect(g).toEqual({ outcome: { kind: "nak", delayMs: 3200, reason: "breaker open" }, counter: "breakerWaits" });
  });
  test("otherwise the task is taken up", () => {
    expect(gate({ fenced: false, breaker: breaker(true), random: () => 0 })).toBeUndefined();
  });
});

describe("a claim that does not give us the row never calls the provider", () => {
  test("no row (never accepted): acked", () =>
    expect(afterClaim({ kind: "missing" })).toMatchObject({ outcome: { kind: "ack" }, counter: "orphanMessages" }));
  test("already final: acked, nothing solved twice", () =>
    expect(afterClaim({ kind: "terminal", row: { state: "completed" } })).toMatchObject({
      outcome: { kind: "ack", reason: "already completed" },
      counter: "dedupAcks",
    }));
  test("leased by another worker: delivered again after its lease", () =>
    expect(afterClaim({ kind: "busy", leaseLeftMs: 4000 })).toMatchObject({
      outcome: { kind: "nak", delayMs: 4500 },
      counter: "busyNaks",
    }));
  test("claimed: the row", () =>
    expect(afterClaim({ kind: "claimed", row: { id: "t" } })).toEqual({ row: { id: "t" } }));
});

describe("a task out of time or attempts is dead-lettered, never submitted", () => {
  test("past its deadline at the claim", () => {
    expect(atStart(row({ deadlineAt: new Date(1000) }), 2000, limits)).toEqual({
      kind: "deadLetter",
      reason: "deadline passed",
      code: "DEADLINE_EXCEEDED",
    });
  });
  test("past its attempts at the claim, with the last error's code", () => {
    expect(atStart(row({ attempts: 6, errorCode: "ERROR_NO_SLOT_AVAILABLE" }), 0, limits)).toEqual({
      kind: "deadLetter",
      reason: "max attempts",
      code: "ERROR_NO_SLOT_AVAILABLE",
    });
  });
  test("within both: go on", () =>
    expect(atStart(row({ attempts: 5, deadlineAt: new Date(5000) }), 2000, limits)).toBeUndefined());
  test("a retry on the last attempt is a dead letter", () => {
    expect(
      retryOrDeadLetter(row({ attempts: 5 }), { kind: "retry", code: "X", delayMs: 10, why: "w" }, 0, limits),
    ).toEqual({ kind: "deadLetter", reason: "max attempts", code: "X" });
  });
  test("a retry that would land past the deadline is a dead letter", () => {
    expect(
      retryOrDeadLetter(row({ deadlineAt: new Date(1000) }), { kind: "retry", delayMs: 2000, why: "w" }, 0, limits),
    ).toEqual({ kind: "deadLetter", reason: "deadline passed", code: "DEADLINE_EXCEEDED" });
  });
  test("otherwise the retry stands", () => {
    const r = { kind: "retry" as const, delayMs: 10, why: "w" };
    expect(retryOrDeadLetter(row(), r, 0, limits)).toBe(r);
  });
});

describe("the provider's answer to a submit", () => {
  const o = { attempts: 2, resubmits: 0, profile, limits };
  test("a provider id is checkpointed before anything else", () =>
    expect(afterSubmit(ok("123"), o)).toEqual({ kind: "checkpoint", providerId: "123" }));
  test("a captcha the provider refuses fails the task (no retry pays again)", () =>
    expect(afterSubmit(err("ERROR_WRONG_CAPTCHA_ID"), o).kind).toBe("fail"));
  test("a key-level error stops the key: the task waits, no attempt spent", () =>
    expect(afterSubmit(err("ERROR_ZERO_BALANCE"), o)).toEqual({ kind: "keyStopped", code: "ERROR_ZERO_BALANCE" }));
  test("no slot at the provider: retried after the attempt's backoff", () =>
    expect(afterSubmit(err("ERROR_NO_SLOT_AVAILABLE"), o)).toMatchObject({
      kind: "retry",
      code: "ERROR_NO_SLOT_AVAILABLE",
      why: "submit: ERROR_NO_SLOT_AVAILABLE",
    }));
  test("an unanswered submit is retried (and may have paid: the log says so)", () =>
    expect(afterSubmit(transport, o)).toMatchObject({ kind: "retry", code: "TRANSPORT" }));
  test("unsolvable at submit: a new provider task, until the resubmit budget is spent", () => {
    expect(afterSubmit(err("ERROR_CAPTCHA_UNSOLVABLE"), o)).toEqual({ kind: "resubmit" });
    expect(afterSubmit(err("ERROR_CAPTCHA_UNSOLVABLE"), { ...o, resubmits: 3 })).toEqual({
      kind: "fail",
      code: "ERROR_CAPTCHA_UNSOLVABLE",
    });
  });
});

describe("the provider's answer to a poll", () => {
  const o = { transportErrors: 0, profile, limits };
  test("the answer completes the task", () => expect(afterPoll(ok("tok"), o)).toEqual({ kind: "complete" }));
  test("not ready: poll again after the poll interval", () =>
    expect(afterPoll(notReady, o)).toEqual({ kind: "pollAgain", delayMs: 5000 }));
  test("a transport error: poll again, the pause growing with each one", () => {
    expect(afterPoll(transport, { ...o, transportErrors: 1 })).toEqual({ kind: "pollAgain", delayMs: 5000 });
    expect(afterPoll(transport, { ...o, transportErrors: 6 }).kind).toBe("pollAgain");
    expect((afterPoll(transport, { ...o, transportErrors: 6 }) as { delayMs: number }).delayMs).toBeGreaterThan(5000);
  });
  test("the provider gave the task up: a new provider task (the stored id is never polled again)", () =>
    expect(afterPoll(err("ERROR_CAPTCHA_UNSOLVABLE"), o)).toEqual({ kind: "resubmit" }));
  test("a key-level error while polling stops the key", () =>
    expect(afterPoll(err("ERROR_KEY_DOES_NOT_EXIST"), o)).toEqual({
      kind: "keyStopped",
      code: "ERROR_KEY_DOES_NOT_EXIST",
    }));
  test("a retryable error while polling: the same provider task, polled again (never resubmitted)", () =>
    expect(afterPoll(err("ERROR_NO_SLOT_AVAILABLE"), o).kind).toBe("pollAgain"));
});

describe("before each poll", () => {
  test("a rotated key ends the wait: its provider task is never polled with the old key", () =>
    expect(beforePoll({ keyInUse: "b", keyOfTask: "a", polls: 0, maxPolls: 20 })).toEqual({ kind: "rotated" }));
  test("a spent poll budget ends the wait with a new provider task", () =>
    expect(beforePoll({ keyInUse: "a", keyOfTask: "a", polls: 20, maxPolls: 20 })).toEqual({ kind: "resubmit" }));
  test("otherwise poll", () =>
    expect(beforePoll({ keyInUse: "a", keyOfTask: "a", polls: 19, maxPolls: 20 })).toBeUndefined());
  test("resubmits are bounded per delivery", () => {
    expect(resubmitOrFail(2, limits)).toEqual({ kind: "resubmit" });
    expect(resubmitOrFail(3, limits)).toEqual({ kind: "fail", code: "ERROR_CAPTCHA_UNSOLVABLE" });
  });
});

describe("the breaker reads every reply", () => {
  test("transport errors and retryable codes count as failures, answers as successes, key codes stop the key", () => {
    const calls: string[] = [];
    const b = {
      failure: () => calls.push("failure"),
      success: () => calls.push("success"),
      keyStopped: (c: string) => calls.push(`stop ${c}`),
    };
    for (const r of [
      transport,
      err("ERROR_NO_SLOT_AVAILABLE"),
      ok("x"),
      notReady,
      err("ERROR_ZERO_BALANCE"),
      err("ERROR_CAPTCHA_UNSOLVABLE"),
    ])
      observeReply(b, profile, r);
    expect(calls).toEqual(["failure", "failure", "success", "success", "stop ERROR_ZERO_BALANCE", "success"]);
  });
  test("with a real breaker: key-level codes open it", () => {
    const b = createBreaker({ failureRate: 0.5, minCalls: 5, windowMs: 10_000, cooldownMs: 1000, maxCooldownMs: 5000 });
    observeReply(b, profile, err("ERROR_ZERO_BALANCE"));
    expect(b.allows()).toBe(false);
  });
});
