import { describe, expect, test } from "bun:test";
import {
  CHECKPOINT_WINDOW_MS,
  drillFigures,
  drillLine,
  drillPassed,
  extraPaid,
  paidInFlightBound,
  splitExtraPaid,
  type TaskRecord,
} from "./drill-line.ts";

const done = (key: string, acceptedAt: number, finalAt: number, token = `t-${key}`): TaskRecord => ({
  key,
  id: `id-${key}`,
  acceptedAt,
  finalAt,
  status: "completed",
  token,
  tokenAfter: token,
  refused: 0,
});

describe("drill figures", () => {
  test("extra paid: per fingerprint, what was paid during the drill beyond one", () => {
    expect(extraPaid({ a: 1 }, { a: 1, b: 1, c: 2, d: 4 })).toBe(1 + 3);
    // A fingerprint paid before the drill and once during it is no extra.
    expect(extraPaid({ a: 1 }, { a: 2 })).toBe(0);
    expect(extraPaid({}, {})).toBe(0);
  });

  test("RTO: from the fault to the last final status of a task acknowledged before it", () => {
    const f = drillFigures([done("a", 1000, 5000), done("b", 9000, 31_000), done("c", 12_000, 13_000)], 10_000, {
      before: {},
      after: { a: 1, b: 1, c: 1 },
    });
    expect(f.rtoS).toBe(21);
    expect(drillPassed(f)).toBe(true);
    expect(drillLine("x", f)).toBe(
      "drill x: acknowledged 3, lost 0, failed 0, extra paid submissions 0 (0 in flight at the fault, 0 unexplained) ($0.00000), double results 0, RPO 0, RTO 21.0 s",
    );
  });

  test("a task acknowledged before the fault that never ended: lost, no RTO, the drill fails", () => {
    const open: TaskRecord = { key: "o", id: "id-o", acceptedAt: 1000, status: "queued", refused: 0 };
    const f = drillFigures([done("a", 1000, 2000), open], 1500, { before: {}, after: {} });
    expect(f).toMatchObject({ acknowledged: 2, lost: 1, rtoS: undefined });
    expect(drillLine("x", f)).toContain("RPO 1, RTO - (a task acknowledged before the fault never ended)");
    expect(drillPassed(f)).toBe(false);
  });

  test("failed, double results and submissions never acknowledged each fail the drill", () => {
    const base = done("a", 1000, 2000);
    const cases: TaskRecord[][] = [
      [{ ...base, status: "failed" }],
      [{ ...base, tokenAfter: "another" }],
      [base, { key: "n", refused: 5 }],
    ];
    const figures = cases.map((c) => drillFigures(c, 0, { before: {}, after: {} }));
    expect(figures.map((f) => [f.failed, f.doubleResults, f.notAccepted, f.refusedAttempts])).toEqual([
      [1, 0, 0, 0],
      [0, 1, 0, 0],
      [0, 0, 1, 5],
    ]);
    expect(figures.map((f) => drillPassed(f))).toEqual([false, false, false]);
    // A retried submission that was then acknowledged is counted, and passes.
    expect(drillPassed(drillFigures([{ ...base, refused: 2 }], 0, { before: {}, after: {} }))).toBe(true);
  });

  test("RTO over the bar fails the drill", () => {
    const f = drillFigures([done("a", 0, 70_000)], 5000, { before: {}, after: {} });
    expect(f.rtoS).toBe(65);
    expect(drillPassed(f)).toBe(false);
  });

  test("a region cut: the RTO counts what the survivor finished before the heal; the rest is counted apart", () => {
    const f = drillFigures(
      [done("a", 1000, 30_000), done("b", 2000, 95_000)],
      5000,
      { before: {}, after: {} },
      { healedAt: 90_000 },
    );
    expect({ rto: f.rtoS, afterHeal: f.afterHeal }).toEqual({ rto: 25, afterHeal: 1 });
    expect(drillPassed(f)).toBe(true);
    // Nothing finished before the heal: no RTO to speak of.
    const none = drillFigures([done("b", 2000, 95_000)], 5000, { before: {}, after: {} }, { healedAt: 90_000 });
    expect(none.rtoS).toBeUndefined();
  });

  // Tasks a, b, c, all completed; the fault at 10 s.
  const three = [done("a", 1000, 5000), done("b", 9000, 31_000), done("c", 12_000, 13_000)];
  const FAULT = 10_000;

  test("a task paid just before the fault (the kill between OK|id and the checkpoint) and again after it: in flight at the fault", () => {
    // b paid 300 ms before the fault, and again 16 s after it (the peer's wait for a checkpoint over).
    const paid = {
      before: { z: 1 },
      after: { z: 1, a: 1, b: 2, c: 1 },
      paidAtAfter: { z: [10], a: [1100], b: [FAULT - 300, FAULT + 16_000], c: [12_100] },
    };
    const f = drillFigures(three, FAULT, paid);
    expect([f.extraPaid, f.extraPaidInFlightAtFault, f.extraPaidUnexplained]).toEqual([1, 1, 0]);
    expect(drillLine("solver-kill", f)).toContain(
      "extra paid submissions 1 (1 in flight at the fault, 0 unexplained) ($0.00145), double results 0",
    );
    // Passes where the drill kills solvers (the bound of its load), fails where it kills none.
    expect(drillPassed(f, { maxInFlightAtFault: paidInFlightBound(4) })).toBe(true);
    expect(drillPassed(f)).toBe(false);
    // A first payment while the fault was being injected (after faultAt, before it returned) counts too.
    const during = { ...paid, paidAtAfter: { ...paid.paidAtAfter, b: [FAULT + 400, FAULT + 16_000] } };
    expect(splitExtraPaid(during, { at: FAULT, injectedAt: FAULT + 500 })).toEqual({
      inFlightAtFault: 1,
      unexplained: 0,
    });
    expect(splitExtraPaid(during, { at: FAULT })).toEqual({ inFlightAtFault: 0, unexplained: 1 });
  });

  test("a second payment whose first was long before the fault is unexplained, and fails the drill", () => {
    const paid = {
      before: {},
      after: { a: 1, b: 2, c: 1 },
      paidAtAfter: { a: [1100], b: [FAULT - CHECKPOINT_WINDOW_MS - 1, FAULT + 16_000], c: [12_100] },
    };
    const f = drillFigures(three, FAULT, paid);
    expect([f.extraPaid, f.extraPaidInFlightAtFault, f.extraPaidUnexplained]).toEqual([1, 0, 1]);
    expect(drillLine("solver-kill", f)).toContain("extra paid submissions 1 (0 in flight at the fault, 1 unexplained)");
    expect(drillPassed(f, { maxInFlightAtFault: 2 })).toBe(false);
    // Both payments before the fault (no kill in between): unexplained.
    const bothBefore = { ...paid, paidAtAfter: { ...paid.paidAtAfter, b: [FAULT - 300, FAULT - 100] } };
    expect(splitExtraPaid(bothBefore, { at: FAULT })).toEqual({ inFlightAtFault: 0, unexplained: 1 });
  });

  test("a third payment, payment times unknown (an older emulator), or more in flight than the bound: unexplained or failing", () => {
    const thrice = { before: {}, after: { b: 3 }, paidAtAfter: { b: [FAULT - 300, FAULT + 16_000, FAULT + 40_000] } };
    expect(splitExtraPaid(thrice, { at: FAULT })).toEqual({ inFlightAtFault: 1, unexplained: 1 });
    const noTimes = drillFigures(three, FAULT, { before: {}, after: { a: 1, b: 2, c: 1 } });
    expect([noTimes.extraPaidInFlightAtFault, noTimes.extraPaidUnexplained]).toEqual([0, 1]);
    expect(drillPassed(noTimes, { maxInFlightAtFault: 2 })).toBe(false);
    // Times of payments made before the drill are skipped: b was paid once before it, twice during it.
    const skipped = { before: { b: 1 }, after: { b: 3 }, paidAtAfter: { b: [0, FAULT - 300, FAULT + 16_000] } };
    expect(splitExtraPaid(skipped, { at: FAULT })).toEqual({ inFlightAtFault: 1, unexplained: 0 });
    const many = {
      before: {},
      after: { a: 2, b: 2, c: 2 },
      paidAtAfter: Object.fromEntries(["a", "b", "c"].map((k) => [k, [FAULT - 100, FAULT + 16_000]])),
    };
    const f = drillFigures(three, FAULT, many);
    expect([f.extraPaidInFlightAtFault, f.extraPaidUnexplained]).toEqual([3, 0]);
    expect(paidInFlightBound(4)).toBe(2);
    expect(drillPassed(f, { maxInFlightAtFault: paidInFlightBound(4) })).toBe(false);
    expect(drillPassed(f, { maxInFlightAtFault: 3 })).toBe(true);
  });
});
