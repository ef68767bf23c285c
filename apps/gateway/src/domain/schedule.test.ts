import { describe, expect, test } from "bun:test";
import { planSchedule, scheduledDeadline } from "./schedule.ts";

const NOW = Date.parse("2026-12-06T08:00:00Z");
const L = { maxAheadMs: 24 * 3600_000, marginMs: 5_000, defaultSolveMs: 60_000 };
const at = (ms: number) => new Date(NOW + ms).toISOString();

function plan(req: { notBefore?: string; needBy?: string }, p90?: number) {
  const r = planSchedule(req, NOW, p90, L);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.plan;
}

describe("planSchedule", () => {
  test("no instants: no schedule", () => {
    expect(plan({})).toEqual({ notBefore: null, needBy: null, startAt: null, leadMs: 65_000 });
  });

  test("notBefore alone starts at notBefore", () => {
    expect(plan({ notBefore: at(600_000) }).startAt?.getTime()).toBe(NOW + 600_000);
  });

  test("needBy starts at needBy minus the measured p90 and the margin", () => {
    const p = plan({ needBy: at(3_600_000) }, 20_000);
    expect(p.leadMs).toBe(25_000);
    expect(p.startAt?.getTime()).toBe(NOW + 3_600_000 - 25_000);
  });

  test("needBy without a measured p90 uses the conservative default", () => {
    expect(plan({ needBy: at(3_600_000) }).startAt?.getTime()).toBe(NOW + 3_600_000 - 65_000);
  });

  test("never before notBefore", () => {
    const p = plan({ notBefore: at(3_590_000), needBy: at(3_600_000) }, 20_000);
    expect(p.startAt?.getTime()).toBe(NOW + 3_590_000);
  });

  test("never before now: a needBy closer than the lead starts at once", () => {
    const p = plan({ needBy: at(30_000) }, 40_000);
    expect(p.startAt).toBeNull();
    expect(p.needBy?.getTime()).toBe(NOW + 30_000);
  });

  test("an offset is read as the instant it names", () => {
    expect(plan({ notBefore: "2026-12-06T10:00:00+01:00" }).startAt?.getTime()).toBe(NOW + 3_600_000);
  });

  test("errors name the field", () => {
    const r = planSchedule({ notBefore: at(-1000), needBy: at(25 * 3600_000) }, NOW, undefined, L);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors).toEqual([
      { field: "notBefore", message: "must be in the future" },
      { field: "needBy", message: "must be at most 1440 minutes ahead" },
    ]);
  });

  test("needBy must be after notBefore", () => {
    const r = planSchedule({ notBefore: at(60_000), needBy: at(60_000) }, NOW, undefined, L);
    expect(r).toEqual({ ok: false, errors: [{ field: "needBy", message: "must be after notBefore" }] });
  });
});

describe("scheduledDeadline", () => {
  test("needBy is the deadline", () => {
    const p = plan({ needBy: at(3_600_000) }, 20_000);
    expect(scheduledDeadline(p, NOW, 600_000).getTime()).toBe(NOW + 3_600_000);
  });

  test("without needBy: the usual span from the start", () => {
    const p = plan({ notBefore: at(60_000) });
    expect(scheduledDeadline(p, NOW, 600_000).getTime()).toBe(NOW + 660_000);
    expect(scheduledDeadline(plan({}), NOW, 600_000).getTime()).toBe(NOW + 600_000);
  });
});
