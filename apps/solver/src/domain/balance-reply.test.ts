import { expect, test } from "bun:test";
import { parseProviderReply } from "@pipeline/shared/provider";
import { readBalanceReply } from "./balance-reply.ts";

test("a getbalance reply's decimal text is the balance in micro-dollars, plain or json=1", () => {
  expect(readBalanceReply(parseProviderReply(200, '{"status":1,"request":"99.88041"}'))).toEqual({
    ok: true,
    micros: 99_880_410,
  });
  expect(readBalanceReply(parseProviderReply(200, '{"status":1,"request":3.2857}'))).toEqual({
    ok: true,
    micros: 3_285_700,
  });
  expect(readBalanceReply(parseProviderReply(200, "OK|100"))).toEqual({ ok: true, micros: 100_000_000 });
  expect(readBalanceReply({ kind: "ok", value: "-0.25" })).toEqual({ ok: true, micros: -250_000 });
});

test("anything else is no balance, and the error names the field or the code", () => {
  const bad = readBalanceReply(parseProviderReply(200, '{"status":1,"request":"lots"}'));
  expect(bad).toEqual({ ok: false, error: 'getbalance reply: request is not a decimal balance ("lots")' });
  expect(readBalanceReply(parseProviderReply(200, "ERROR_WRONG_USER_KEY"))).toEqual({
    ok: false,
    error: "getbalance reply: provider error ERROR_WRONG_USER_KEY",
  });
  expect(readBalanceReply(parseProviderReply(502, "<html>bad gateway</html>"))).toEqual({
    ok: false,
    error: "getbalance: HTTP 502",
  });
});
