import { describe, expect, test } from "bun:test";
import { FairScheduler } from "./fair-share.ts";

/**
 * A saturated plan of `threads`, each task holding its thread `holdMs`; every group always has
 * work, the last one from `lateMs` on (before that the others have the plan to themselves).
 * Returns each group's thread-milliseconds from two hold times after `lateMs` (the late group's
 * ramp over) to `untilMs`.
 */
function simulate(weights: Record<string, number>, threads: number, holdMs: number, untilMs: number, lateMs = 0) {
  let now = 0;
  const fair = new FairScheduler({ weightOf: (g) => weights[g ?? "default"] ?? 1, now: () => now });
  const all = Object.keys(weights);
  let groups = lateMs > 0 ? all.slice(0, -1) : all;
  const from = lateMs > 0 ? lateMs + 2 * holdMs : 0;
  const ms = new Map<string, number>();
  const running: { id: string; group: string; at: number; endsAt: number }[] = [];
  let n = 0;
  const startOne = () => {
    const group = groups[fair.pick(groups.map((g) => ({ group: g })))]!;
    const id = `${group}-${n++}`;
    fair.took(id, group);
    running.push({ id, group, at: now, endsAt: now + holdMs });
  };
  for (let i = 0; i < threads; i++) startOne();
  while (now < untilMs) {
    running.sort((x, y) => x.endsAt - y.endsAt);
    const next = running.shift()!;
    now = next.endsAt;
    fair.ended(next.id);
    ms.set(next.group, (ms.get(next.group) ?? 0) + Math.max(0, now - Math.max(next.at, from)));
    if (lateMs > 0 && now >= lateMs && groups.length < all.length) {
      groups = all;
    }
    startOne();
  }
  return ms;
}

describe("weighted fair share of threads", () => {
  test("two groups with work, weights 1 and 3: thread-seconds 1:3", () => {
    const ms = simulate({ a: 1, b: 3 }, 40, 1000, 60_000);
    const ratio = ms.get("b")! / ms.get("a")!;
    expect(ratio).toBeGreaterThan(2.9);
    expect(ratio).toBeLessThan(3.1);
  });

  test("a group arriving while the other holds every thread, solves 3 s against a 1 s first guess: 1:3 from its arrival", () => {
    const ms = simulate({ bulk: 1, team: 3 }, 40, 3000, 130_000, 10_000);
    const ratio = ms.get("team")! / ms.get("bulk")!;
    expect(ratio).toBeGreaterThan(2.85);
    expect(ratio).toBeLessThan(3.15);
  });

  test("equal weights: equal thread-seconds", () => {
    const ms = simulate({ a: 1, b: 1 }, 10, 700, 30_000);
    expect(Math.abs(ms.get("a")! - ms.get("b")!) / ms.get("a")!).toBeLessThan(0.05);
  });

  test("a group arriving late does not bank credit: it gets its share, not everything for as long as the other ran", () => {
    let now = 0;
    const fair = new FairScheduler({ weightOf: () => 1, now: () => now });
    for (let i = 0; i < 100; i++) {
      fair.took(`a${i}`, "a");
      now += 1000;
      fair.ended(`a${i}`);
    }
    // b arrives after a had 100 thread-seconds alone: equal weights, so the two alternate.
    const order: string[] = [];
    for (let i = 0; i < 8; i++) {
      const g = ["a", "b"][fair.pick([{ group: "a" }, { group: "b" }])]!;
      order.push(g);
      fair.took(`${g}-x${i}`, g);
    }
    expect(order.filter((g) => g === "b").length).toBe(4);
  });

  test("worker slots go to the group holding fewest per weight, so every group keeps tasks at the plan", () => {
    const fair = new FairScheduler({ weightOf: (g) => (g === "team" ? 3 : 1) });
    const vacate = Array.from({ length: 30 }, () => fair.occupy("bulk"));
    for (let i = 0; i < 60; i++) fair.occupy("team");
    // bulk 30 of weight 1 = 30 per weight; team 60 of weight 3 = 20: team next.
    expect(fair.pick([{ group: "bulk" }, { group: "team" }])).toBeGreaterThanOrEqual(0);
    expect(fair.slotRank("team")).toBeLessThan(fair.slotRank("bulk"));
    for (const v of vacate.slice(0, 15)) v();
    vacate[0]!(); // twice changes nothing
    expect(fair.slotRank("bulk")).toBe(15);
    expect(fair.slotRank("bulk")).toBeLessThan(fair.slotRank("team"));
  });

  test("a group alone gets every thread (nothing else waits)", () => {
    const fair = new FairScheduler({ weightOf: () => 1 });
    expect(fair.pick([{ group: "a" }, { group: "a" }])).toBe(0);
  });

  test("a charge is corrected by the real hold time: long solves count for more", () => {
    let now = 0;
    const fair = new FairScheduler({ weightOf: () => 1, now: () => now, initialHoldMs: 1000 });
    fair.took("s", "slow");
    fair.took("f", "fast");
    // Each group still holds a thread afterwards (a group holding none competes from the floor).
    fair.took("s2", "slow");
    fair.took("f2", "fast");
    now = 200;
    fair.ended("f");
    now = 5000;
    fair.ended("s");
    expect(fair.rank("slow")).toBeGreaterThan(fair.rank("fast"));
    expect(fair.pick([{ group: "slow" }, { group: "fast" }])).toBe(1);
  });
});
