import { describe, expect, test } from "bun:test";
import { atStart, NEED_BY_PASSED, needByPassed, retryOrDeadLetter } from "./lifecycle.ts";

const limits = { maxAttempts: 5 };
const row = (needBy: number | null, deadline: number | null = null) => ({
  attempts: 1,
  errorCode: null,
  deadlineAt: deadline === null ? null : new Date(deadline),
  needBy: needBy === null ? null : new Date(needBy),
});

describe("needBy in the task's lifecycle", () => {
  test("a task claimed after its needBy fails with NEED_BY_PASSED, before any provider call", () => {
    expect(atStart(row(1000, 1000), 1001, limits)).toEqual({
      kind: "deadLetter",
      reason: "needBy passed",
      code: NEED_BY_PASSED,
    });
  });

  test("a task claimed before its needBy starts", () => {
    expect(atStart(row(1000, 1000), 999, limits)).toBeUndefined();
    expect(atStart(row(null), 5_000_000, limits)).toBeUndefined();
  });

  test("a retry that would land past needBy fails with NEED_BY_PASSED instead", () => {
    const retry = { kind: "retry" as const, code: "ERROR_NO_SLOT_AVAILABLE", delayMs: 2000, why: "x" };
    expect(retryOrDeadLetter(row(3000), retry, 1500, limits)).toEqual({
      kind: "deadLetter",
      reason: "needBy passed",
      code: NEED_BY_PASSED,
    });
    expect(retryOrDeadLetter(row(3000), retry, 500, limits)).toEqual(retry);
  });

  test("the waiting room's check: only strictly past needBy", () => {
    expect(needByPassed(undefined, 10)).toBeUndefined();
    expect(needByPassed(10, 10)).toBeUndefined();
    expect(needByPassed(10, 11)?.kind).toBe("deadLetter");
  });
});
