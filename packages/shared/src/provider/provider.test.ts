import { describe, expect, test } from "bun:test";
import { classifyError } from "./classify.ts";
import { toProviderParams } from "./params.ts";
import { parseProviderReply, splitBulkAnswer } from "./replies.ts";

describe("provider replies", () => {
  test("plain and JSON answers", () => {
    expect(parseProviderReply(200, "OK|4123")).toEqual({ kind: "ok", value: "4123" });
    expect(parseProviderReply(200, '{"status":1,"request":"4123"}')).toEqual({ kind: "ok", value: "4123" });
    expect(parseProviderReply(200, '{"status":1,"request":4123}')).toEqual({ kind: "ok", value: "4123" });
    expect(parseProviderReply(200, '{"status":1,"request":"tok","useragent":"UA"}')).toEqual({
      kind: "ok",
      value: "tok",
      extra: { useragent: "UA" },
    });
  });
  test("not ready, in both spellings", () => {
    expect(parseProviderReply(200, "CAPCHA_NOT_READY")).toEqual({ kind: "not_ready" });
    expect(parseProviderReply(200, '{"status":0,"request":"CAPTCHA_NOT_READY"}')).toEqual({ kind: "not_ready" });
  });
  test("error codes", () => {
    expect(parseProviderReply(200, "ERROR_WRONG_USER_KEY")).toEqual({ kind: "error", code: "ERROR_WRONG_USER_KEY" });
    expect(parseProviderReply(200, '{"status":0,"request":"ERROR_ZERO_BALANCE"}')).toEqual({
      kind: "error",
      code: "ERROR_ZERO_BALANCE",
    });
    expect(parseProviderReply(200, "ERROR: 1002")).toEqual({ kind: "error", code: "ERROR: 1002" });
  });
  test("HTML pages, 5xx and garbage are transport failures", () => {
    expect(parseProviderReply(502, "<html>Bad gateway</html>").kind).toBe("transport");
    expect(parseProviderReply(200, "<html>oops</html>").kind).toBe("transport");
    expect(parseProviderReply(200, "{not json").kind).toBe("transport");
    expect(parseProviderReply(200, '{"status":0,"request":"<b>x</b>"}').kind).toBe("transport");
  });
});

describe("error classes", () => {
  test.each([
    ["ERROR_NO_SLOT_AVAILABLE", "retry"],
    ["MAX_USER_TURN", "retry"],
    ["ERROR: 1003", "retry"],
    ["ERROR_CAPTCHA_UNSOLVABLE", "resubmit"],
    ["ERROR_BAD_DUPLICATES", "resubmit"],
    ["ERROR_PAGEURL", "task_fails"],
    ["ERROR_TOO_BIG_CAPTCHA_FILESIZE", "task_fails"],
    ["ERROR_WRONG_USER_KEY", "key_stops"],
    ["IP_BANNED", "key_stops"],
    ["ERROR_SOMETHING_NEW", "retry"],
  ] as const)("%s is %s", (code, cls) => {
    expect(classifyError(code, "captchaai")).toBe(cls);
  });
  test("ERROR_ZERO_BALANCE depends on the provider profile", () => {
    expect(classifyError("ERROR_ZERO_BALANCE", "2captcha")).toBe("key_stops");
    expect(classifyError("ERROR_ZERO_BALANCE", "captchaai")).toBe("retry");
  });
});

describe("in.php params", () => {
  test("recaptcha v3 maps to userrecaptcha + version=v3", () => {
    expect(
      toProviderParams({
        type: "recaptcha_v3",
        params: { sitekey: "k", pageurl: "https://e.com", action: "login", min_score: 0.3 },
      }),
    ).toEqual({
      method: "userrecaptcha",
      version: "v3",
      googlekey: "k",
      pageurl: "https://e.com",
      action: "login",
      min_score: "0.3",
    });
  });
  test("turnstile cdata goes as data; false flags are omitted", () => {
    expect(
      toProviderParams({ type: "turnstile", params: { sitekey: "s", pageurl: "https://e.com", cdata: "c" } }),
    ).toEqual({ method: "turnstile", sitekey: "s", pageurl: "https://e.com", data: "c" });
    expect(
      toProviderParams({
        type: "recaptcha_v2",
        params: { sitekey: "s", pageurl: "https://e.com", invisible: false, data_s: "d" },
      }),
    ).toEqual({ method: "userrecaptcha", googlekey: "s", pageurl: "https://e.com", "data-s": "d" });
  });
  test("images go as base64 with hints", () => {
    expect(toProviderParams({ type: "image", params: { body: "aGk=", case_sensitive: true, numeric: 1 } })).toEqual({
      method: "base64",
      body: "aGk=",
      regsense: "1",
      numeric: "1",
    });
  });
});

describe("bulk get answers", () => {
  test("one reply per id, in order: answers, not ready, task errors", () => {
    expect(splitBulkAnswer("0.TOKEN-1|CAPCHA_NOT_READY|ERROR_CAPTCHA_UNSOLVABLE", 3)).toEqual([
      { kind: "ok", value: "0.TOKEN-1" },
      { kind: "not_ready" },
      { kind: "error", code: "ERROR_CAPTCHA_UNSOLVABLE" },
    ]);
  });
  test("a count that does not match (an answer holding '|') is refused, so the ids are polled one by one", () => {
    expect(splitBulkAnswer('{"geetest_seccode":"abc|jordan"}|CAPCHA_NOT_READY', 2)).toBeUndefined();
  });
});
