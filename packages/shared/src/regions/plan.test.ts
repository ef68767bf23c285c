import { expect, test } from "bun:test";
import type { Observed } from "./lease.ts";
import { entryChanged, type PlanEntry, type PlanRecord, planShare, released, withEntry } from "./plan.ts";

const e = (share: number, want: number, used = share, plan = 10): PlanEntry => ({ plan, share, want, used, at: 0 });
const none = () => false;

test("a region alone takes what it asks for, up to the plan", () => {
  expect(planShare("a", { regions: {} }, { plan: 10, used: 0, want: 4 }, none)).toMatchObject({ target: 4, share: 4 });
  expect(planShare("a", { regions: {} }, { plan: 10, used: 0, want: 40 }, none)).toMatchObject({ target: 10 });
});

test("a region grows only into the room the others leave, counting what they hold above their share", () => {
  const rec: PlanRecord = { regions: { b: e(6, 6) } };
  expect(planShare("a", rec, { plan: 10, used: 0, want: 9 }, none)).toMatchObject({ target: 4, share: 4 });
  const holdsMore: PlanRecord = { regions: { b: e(6, 6, 8) } };
  expect(planShare("a", holdsMore, { plan: 10, used: 0, want: 9 }, none).target).toBe(2);
});

test("the smallest configured plan of the counted regions is in force", () => {
  const rec: PlanRecord = { regions: { b: e(0, 0, 0, 5) } };
  expect(planShare("a", rec, { plan: 10, used: 0, want: 9 }, none)).toMatchObject({ plan: 5, target: 5 });
});

test("while another region is starved, one holding more than a fair share shrinks its cap; its share stays above what it holds", () => {
  const rec: PlanRecord = { regions: { b: e(2, 8) } };
  const d = planShare("a", rec, { plan: 10, used: 8, want: 10 }, none);
  expect(d.othersStarved).toBe(true);
  expect(d.target).toBe(5);
  expect(d.share).toBe(8);
  // Its blocks shrank to the cap: the next round shows 5.
  expect(planShare("a", rec, { plan: 10, used: 5, want: 10 }, none).share).toBe(5);
});

test("a lost region counts until released, then its entry is dropped and its share is free", () => {
  const rec: PlanRecord = { regions: { b: e(7, 7), a: e(3, 10) } };
  expect(planShare("a", rec, { plan: 10, used: 3, want: 10 }, none)).toMatchObject({ target: 3, drop: [] });
  const d = planShare("a", rec, { plan: 10, used: 3, want: 10 }, (r) => r === "b");
  expect(d).toMatchObject({ target: 10, drop: ["b"] });
  expect(Object.keys(withEntry(rec, "a", e(d.share, 10), d.drop).regions)).toEqual(["a"]);
});

test("released: only a lease another region took over, and only after the release time", () => {
  const seen = (holder: string, changedAt: number): Observed => ({
    lease: { holder, epoch: 2, renewedAt: 0 },
    revision: 5,
    changedAt,
  });
  expect(released("b", seen("b", 0), 60_000, 5000)).toBe(false);
  expect(released("b", seen("a", 1000), 5999, 5000)).toBe(false);
  expect(released("b", seen("a", 1000), 6000, 5000)).toBe(true);
  expect(released("b", undefined, 60_000, 5000)).toBe(false);
});

test("no region's claims, summed, leave room for more than the plan (random rounds)", () => {
  let seed = 7;
  const rnd = (n: number) => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed % n;
  };
  const regions = ["a", "b", "c"];
  const held: Record<string, number> = { a: 0, b: 0, c: 0 };
  let rec: PlanRecord = { regions: {} };
  for (let i = 0; i < 5000; i++) {
    const r = regions[rnd(3)]!;
    const want = rnd(12);
    const d = planShare(r, rec, { plan: 10, used: held[r]!, want }, none);
    // The region's real holding moves within its cap (it only starts tasks under the target).
    held[r] = Math.min(Math.max(held[r]!, d.target), rnd(2) ? d.target : held[r]!);
    if (rnd(3) === 0) held[r] = Math.max(0, held[r]! - rnd(3));
    rec = withEntry(rec, r, e(Math.max(d.target, held[r]!), want, held[r]!), d.drop);
    const total = Object.values(held).reduce((n, x) => n + x, 0);
    expect(total).toBeLessThanOrEqual(10);
  }
});

test("a write that changes only the clock is no change", () => {
  expect(entryChanged(e(3, 4), { ...e(3, 4), at: 99 })).toBe(false);
  expect(entryChanged(e(3, 4), e(3, 5))).toBe(true);
  expect(entryChanged(undefined, e(0, 0))).toBe(true);
});
