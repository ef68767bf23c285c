import { expect, test } from "bun:test";
import { reportOutcome } from "./report-outcome.ts";

const o = { maxAttempts: 5, baseMs: 1000, maxMs: 60_000 };

test("OK_REPORT_RECORDED (plain or JSON) and ERROR_DUPLICATE_REPORT are recorded", () => {
  expect(reportOutcome({ kind: "ok", value: "OK_REPORT_RECORDED" }, 1, o)).toEqual({
    kind: "recorded",
    reply: "OK_REPORT_RECORDED",
  });
  expect(reportOutcome({ kind: "error", code: "OK_REPORT_RECORDED" }, 1, o).kind).toBe("recorded");
  expect(reportOutcome({ kind: "error", code: "ERROR_DUPLICATE_REPORT" }, 2, o).kind).toBe("recorded");
});

test("the provider's refusals are final", () => {
  for (const code of ["ERROR_REPORT_NOT_RECORDED", "ERROR_WRONG_CAPTCHA_ID"])
    expect(reportOutcome({ kind: "error", code }, 1, o)).toEqual({ kind: "refused", reply: code });
});

test("transport failures and other errors are retried with a growing delay, until the attempts run out", () => {
  expect(reportOutcome({ kind: "transport", reason: "HTTP 502" }, 1, o)).toEqual({
    kind: "retry",
    reply: "HTTP 502",
    delayMs: 1000,
  });
  expect(reportOutcome({ kind: "error", code: "ERROR_NO_SLOT_AVAILABLE" }, 3, o)).toMatchObject({
    kind: "retry",
    delayMs: 4000,
  });
  expect(reportOutcome({ kind: "transport", reason: "timeout" }, 5, o)).toEqual({
    kind: "refused",
    reply: "gave up after 5 attempts: timeout",
  });
});
