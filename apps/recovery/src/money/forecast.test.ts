import { expect, test } from "bun:test";
import { balanceVerdict, describeForecast, forecastBalance } from "./forecast.ts";

const now = Date.parse("2026-12-06T12:00:00Z");
const acct = (balanceMicros: number | null, spentLastHourMicros: number, sampledAt: number | null = now - 30_000) => ({
  provider: "2captcha.com/key_0123456789ab",
  balanceMicros,
  sampledAt: balanceMicros === null ? null : sampledAt,
  spentLastHourMicros,
});
const limits = { warnHours: 6, staleMs: 15 * 60_000 };

test("hours left are the balance over the last hour's net spend", () => {
  expect(forecastBalance(acct(12_000_000, 2_000_000)).hoursLeft).toBe(6);
  expect(forecastBalance(acct(1_000_000, 3_000_000)).hoursLeft).toBeCloseTo(1 / 3, 10);
  expect(forecastBalance(acct(12_000_000, 2_000_000)).spendPerHourMicros).toBe(2_000_000);
});

test("no spend (or refunds outweighing it) is no bound; a spent balance is 0 h; no sample is unknown", () => {
  expect(forecastBalance(acct(5_000_000, 0)).hoursLeft).toBeNull();
  expect(forecastBalance(acct(5_000_000, -2990)).hoursLeft).toBeNull();
  expect(forecastBalance(acct(0, 0)).hoursLeft).toBe(0);
  expect(forecastBalance(acct(-500_000, 1000)).hoursLeft).toBe(0);
  expect(forecastBalance(acct(null, 1000)).hoursLeft).toBeNull();
});

test("the line names the account, the balance, the rate, the hours left and the sample's age", () => {
  expect(describeForecast(forecastBalance(acct(12_000_000, 2_000_000)), now)).toBe(
    "2captcha.com/key_0123456789ab: balance $12.000000, spend $2.000000/h, 6.0 h left, sampled 30 s ago",
  );
  expect(describeForecast(forecastBalance(acct(12_000_000, 0)), now)).toContain("no spend in the last hour");
  expect(describeForecast(forecastBalance(acct(null, 10)), now)).toBe(
    "2captcha.com/key_0123456789ab: no balance sample",
  );
});

test("the verdict: fail under 1 h or spent, warn under the threshold, ok above it", () => {
  const v = (b: number | null, s: number, at?: number) =>
    balanceVerdict([forecastBalance(acct(b, s, at))], limits, now);
  expect(v(12_000_000, 1_000_000).level).toBe("ok");
  expect(v(12_000_000, 0).level).toBe("ok");
  const warn = v(5_000_000, 1_000_000);
  expect(warn.level).toBe("warn");
  expect(warn.summary).toStartWith("under 6 h left:");
  expect(warn.hint).toContain("top up");
  expect(v(500_000, 1_000_000).level).toBe("fail");
  expect(v(0, 0).level).toBe("fail");
});

test("a stale sample or spend without any sample is a warning; nothing at all is ok", () => {
  expect(balanceVerdict([forecastBalance(acct(50_000_000, 1000, now - 3600_000))], limits, now)).toMatchObject({
    level: "warn",
    summary: expect.stringContaining("stale sample"),
  });
  expect(balanceVerdict([forecastBalance(acct(null, 2990))], limits, now).level).toBe("warn");
  expect(balanceVerdict([], limits, now)).toEqual({ level: "ok", summary: "no balance sample and no spend yet" });
});
