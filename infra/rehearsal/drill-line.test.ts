import { describe, expect, test } from "bun:test";
import { drillFigures, drillLine, drillPassed, extraPaid, type TaskRecord } from "./drill-line.ts";

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
      "drill x: acknowledged 3, lost 0, failed 0, extra paid submissions 0 ($0.00000), double results 0, RPO 0, RTO 21.0 s",
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
});
