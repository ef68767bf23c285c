import { expect, test } from "bun:test";
import { createRecoveryMetrics } from "./registry.ts";

const P = "2captcha.com/key_0123456789ab";
const IDLE = "ocr.captchaai.com/key_ba9876543210";

test("balance, spend rate and hours left per provider; an idle account has no hours-left series", async () => {
  const m = createRecoveryMetrics({
    balances: async () => [
      { provider: P, balanceMicros: 12_000_000, sampledAt: 0, spendPerHourMicros: 2_000_000, hoursLeft: 6 },
      { provider: IDLE, balanceMicros: 5_000_000, sampledAt: 0, spendPerHourMicros: 0, hoursLeft: null },
    ],
  });
  const text = await (await m.response()).text();
  expect(text).toContain(`pipeline_provider_balance_micros{provider="${P}",app="recovery"} 12000000`);
  expect(text).toContain(`pipeline_provider_spend_micros_per_hour{provider="${P}",app="recovery"} 2000000`);
  expect(text).toContain(`pipeline_provider_balance_hours_left{provider="${P}",app="recovery"} 6`);
  expect(text).toContain(`pipeline_provider_balance_micros{provider="${IDLE}",app="recovery"} 5000000`);
  expect(text).not.toContain(`pipeline_provider_balance_hours_left{provider="${IDLE}"`);
});

test("the last reconciliation's difference, ledger net and balance delta per provider", async () => {
  const m = createRecoveryMetrics();
  m.reconcile.reconciled({
    hours: 24,
    toleranceMicros: 10_000,
    differs: true,
    accounts: [
      {
        provider: P,
        from: null,
        to: null,
        ledgerNetMicros: 2990,
        balanceDeltaMicros: -19_997_010,
        differenceMicros: -20_000_000,
        agrees: false,
      },
      {
        provider: IDLE,
        from: null,
        to: null,
        ledgerNetMicros: 0,
        balanceDeltaMicros: null,
        differenceMicros: null,
        agrees: null,
      },
    ],
  });
  const text = await (await m.response()).text();
  expect(text).toContain(`recovery_reconcile_difference_micros{provider="${P}",app="recovery"} -20000000`);
  expect(text).toContain(`recovery_reconcile_ledger_net_micros{provider="${IDLE}",app="recovery"} 0`);
  expect(text).not.toContain(`recovery_reconcile_difference_micros{provider="${IDLE}"`);
  expect(text).toMatch(/recovery_reconcile_last_run_timestamp_seconds\{app="recovery"\} \d+/);
});
