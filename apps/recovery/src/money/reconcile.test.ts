import { expect, test } from "bun:test";
import { reconcile, renderReconciliations } from "./reconcile.ts";

const t0 = Date.parse("2026-12-05T12:00:00Z");
const t1 = Date.parse("2026-12-06T12:00:00Z");
const input = (first: number | null, last: number | null, ledgerNetMicros: number) => ({
  provider: "ocr.captchaai.com/key_0123456789ab",
  first: first === null ? null : { balanceMicros: first, at: t0 },
  last: last === null ? null : { balanceMicros: last, at: t1 },
  ledgerNetMicros,
});

test("the balance fell by what the ledger booked: difference 0, agrees", () => {
  const r = reconcile(input(100_000_000, 99_880_410, 119_590), 10_000);
  expect(r).toEqual({
    provider: "ocr.captchaai.com/key_0123456789ab",
    from: "2026-12-05T12:00:00.000Z",
    to: "2026-12-06T12:00:00.000Z",
    ledgerNetMicros: 119_590,
    balanceDeltaMicros: 119_590,
    differenceMicros: 0,
    agrees: true,
  });
});

test("a difference within the tolerance agrees; beyond it does not, either way", () => {
  expect(reconcile(input(100_000_000, 99_990_000, 5_000), 10_000)).toMatchObject({
    differenceMicros: 5_000,
    agrees: true,
  });
  expect(reconcile(input(100_000_000, 99_980_000, 5_000), 10_000)).toMatchObject({
    differenceMicros: 15_000,
    agrees: false,
  });
  // A top-up of $20 in the window: the balance rose, the difference is minus the top-up less the spend.
  expect(reconcile(input(100_000_000, 119_997_010, 2_990), 10_000)).toMatchObject({
    balanceDeltaMicros: -19_997_010,
    differenceMicros: -20_000_000,
    agrees: false,
  });
});

test("fewer than two samples compare nothing", () => {
  expect(reconcile(input(null, null, 2990), 10_000)).toMatchObject({ balanceDeltaMicros: null, agrees: null });
  const one = { ...input(100, 100, 0), first: { balanceMicros: 100, at: t1 } };
  expect(reconcile(one, 10_000).agrees).toBeNull();
});

test("the report prints ledger net, balance delta and difference per account, and says what a difference may be", () => {
  const text = renderReconciliations(
    [
      reconcile(input(100_000_000, 99_880_410, 119_590), 10_000),
      reconcile(input(100_000_000, 119_997_010, 2_990), 10_000),
    ],
    24,
    10_000,
  );
  expect(text).toContain("reconcile: the last 24 h, tolerance $0.010000");
  expect(text).toContain(
    "ok    ocr.captchaai.com/key_0123456789ab  ledger net $0.119590  balance delta $0.119590  difference $0.000000",
  );
  expect(text).toContain("DIFF  ocr.captchaai.com/key_0123456789ab  ledger net $0.002990  balance delta -$19.997010");
  expect(text).toContain("a top-up (the pipeline");
});
