import { describe, expect, test } from "bun:test";
import type { TaskView } from "@pipeline/shared/schemas";
import { bare, code, ok } from "./reply.ts";
import { answerOf, bulkGetReply, failureCode, get2Reply, getReply } from "./task-answer.ts";

const view = (over: Partial<TaskView>): TaskView => ({
  id: "0190a000-0000-7000-8000-000000000001",
  type: "recaptcha_v2",
  priority: "normal",
  status: "queued",
  attempts: 0,
  createdAt: "2026-01-01T00:00:00.000Z",
  updatedAt: "2026-01-01T00:00:00.000Z",
  completedAt: null,
  ...over,
});
const done = (token: string, over: Partial<TaskView> = {}) =>
  view({ status: "completed", result: { token, expiresAt: "2026-01-01T00:02:00.000Z" }, ...over });

describe("task state -> res.php answer", () => {
  test("unfinished states are CAPCHA_NOT_READY", () => {
    for (const status of ["queued", "solving", "retrying"] as const)
      expect(answerOf(view({ status }))).toEqual({ kind: "code", code: "CAPCHA_NOT_READY" });
  });
  test("completed hands out the token; Turnstile adds its user agent", () => {
    expect(getReply(done("03AG-tok"))).toEqual(ok("03AG-tok"));
    expect(
      getReply(
        done("0.tok", { type: "turnstile", result: { token: "0.tok", expiresAt: null, userAgent: "Mozilla/5.0" } }),
      ),
    ).toEqual(ok("0.tok", { useragent: "Mozilla/5.0" }));
    // only Turnstile carries the user agent, as providers answer it
    expect(getReply(done("03AG", { result: { token: "03AG", expiresAt: null, userAgent: "UA" } }))).toEqual(ok("03AG"));
  });
  test("expired, failed and cancelled tasks answer codes, never a token", () => {
    expect(getReply(view({ status: "expired", error: { code: "TOKEN_EXPIRED" } }))).toEqual(
      code("ERROR_TOKEN_EXPIRED"),
    );
    expect(getReply(view({ status: "failed", error: { code: "ERROR_CAPTCHA_UNSOLVABLE" } }))).toEqual(
      code("ERROR_CAPTCHA_UNSOLVABLE"),
    );
    expect(getReply(view({ status: "failed", error: { code: "ERROR_PAGEURL" } }))).toEqual(code("ERROR_PAGEURL"));
    expect(getReply(view({ status: "cancelled" }))).toEqual(code("ERROR_CAPTCHA_UNSOLVABLE"));
  });
  test("an unknown task (or another key's) is ERROR_WRONG_CAPTCHA_ID", () => {
    expect(getReply(undefined)).toEqual(code("ERROR_WRONG_CAPTCHA_ID"));
    expect(get2Reply(undefined)).toEqual(code("ERROR_WRONG_CAPTCHA_ID"));
  });
});

describe("failure codes", () => {
  test("protocol codes about the task pass through", () => {
    for (const c of [
      "ERROR_CAPTCHA_UNSOLVABLE",
      "ERROR_BAD_DUPLICATES",
      "ERROR_PAGEURL",
      "ERROR_WRONG_GOOGLEKEY",
      "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
      "ERROR_TOKEN_EXPIRED",
    ])
      expect(failureCode(c)).toBe(c);
  });
  test("the pipeline's own key, account and provider-id troubles, and our own codes, become ERROR_CAPTCHA_UNSOLVABLE", () => {
    for (const c of [
      "ERROR_WRONG_USER_KEY",
      "ERROR_KEY_DOES_NOT_EXIST",
      "ERROR_ZERO_BALANCE",
      "IP_BANNED",
      "ERROR_NO_SLOT_AVAILABLE",
      "ERROR_WRONG_CAPTCHA_ID",
      "ERROR_WRONG_ID_FORMAT",
      "DEADLINE_EXCEEDED",
      "MAX_ATTEMPTS",
      "ERROR_SOMETHING_NEW",
      undefined,
    ]) {
      expect(failureCode(c)).toBe("ERROR_CAPTCHA_UNSOLVABLE");
    }
  });
});

describe("get2, bulk get, reports", () => {
  test("get2 carries the price: after the answer in plain, as a field in JSON", () => {
    expect(get2Reply(done("tok"))).toEqual(ok("tok", { price: "0" }, ["0"]));
    expect(get2Reply(view({ status: "solving" }))).toEqual(code("CAPCHA_NOT_READY"));
  });
  test("bulk get joins answers and codes in the order asked", () => {
    expect(
      bulkGetReply([
        done("a"),
        view({ status: "solving" }),
        undefined,
        view({ status: "failed", error: { code: "ERROR_CAPTCHA_UNSOLVABLE" } }),
      ]),
    ).toEqual(bare("a|CAPCHA_NOT_READY|ERROR_WRONG_CAPTCHA_ID|ERROR_CAPTCHA_UNSOLVABLE"));
  });
});
