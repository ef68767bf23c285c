import { expect, test } from "bun:test";
import { isProviderAccountCode } from "./task-view.ts";

test("provider account codes are hidden from clients; codes about their own task and our own codes are kept (issue 14, low)", () => {
  for (const c of [
    "ERROR_ZERO_BALANCE",
    "IP_BANNED",
    "ERROR_WRONG_USER_KEY",
    "ERROR_KEY_DOES_NOT_EXIST",
    "ERROR_IP_NOT_ALLOWED",
    "ERROR: 1001",
    "ERROR: 1005",
  ])
    expect([c, isProviderAccountCode(c)]).toEqual([c, true]);
  for (const c of [
    "ERROR_PAGEURL",
    "ERROR_CAPTCHA_UNSOLVABLE",
    "ERROR_BAD_PARAMETERS",
    "ERROR_NO_SLOT_AVAILABLE",
    "DEADLINE_EXCEEDED",
    "MAX_ATTEMPTS",
    "TOKEN_EXPIRED",
  ])
    expect([c, isProviderAccountCode(c)]).toEqual([c, false]);
});
