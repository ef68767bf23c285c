import { describe, expect, test } from "bun:test";
import { FairScheduler } from "./fair-share.ts";

/** A saturated plan of `threads`, each task holding its thread `holdMs`; groups `a` and `b` always have work. */
function simulate(weights: Record<string, number>, threads: number, holdMs: number, untilMs: number) {
  let now = 0;
  const fair = new FairScheduler({ weightOf: (g) => weights[g ?? "default"] ?? 1, now: () => now });
  const groups = Object.keys(weights);
  for (const g of groups) fair.arrived(g);
  const running: { id: string; endsAt: number }[] = [];
  let n = 0;
  const startOne = () => {
    const i = fair.pick(groups.map((group) => ({ group })));
    const id = `${groups[i]}-${n++}`;
    fair.took(id, groups[i]);
    running.push({ id, endsAt: now + holdMs });
  };
  for (let i = 0; i < threads; i++) startOne();
  while (now < untilMs) {
    running.sort((x, y) => x.endsAt - y.endsAt);
    const next = running.shift()!;
    now = next.endsAt;
    fair.ended(next.id);
    startOne();
  }
  return fair.threadMs;
}

describe("weighted fair share of threads", () => {
  test("two groups with work, weights 1 and 3: thread-seconds 1:3", () => {
    const ms = simulate({ a: 1, b: 3 }, 40, 1000, 60_000);
    const ratio = ms.get("b")! / ms.get("a")!;
    expect(ratio).toBeGreaterThan(2.9);
    expect(ratio).toBeLessThan(3.1);
  });

  test("equal weights: equal thread-seconds", () => {
    const ms = simulate({ a: 1, b: 1 }, 10, 700, 30_000);
    expect(Math.abs(ms.get("a")! - ms.get("b")!) / ms.get("a")!).toBeLessThan(0.05);
  });

  test("a group arriving late does not bank credit: it gets its share, not everything for as long as the other ran", () => {
    let now = 0;
    const fair = new FairScheduler({ weightOf: () => 1, now: () => now });
    fair.arrived("a");
    for (let i = 0; i < 100; i++) {
      fair.took(`a${i}`, "a");
      now += 1000;
      fair.ended(`a${i}`);
    }
    // b arrives: it starts at a's virtual time, so the two alternate.
    fair.arrived("b");
    expect(fair.rank("b")).toBe(fair.rank("a"));
    const order: string[] = [];
    for (let i = 0; i < 6; i++) {
      const g = ["a", "b"][fair.pick([{ group: "a" }, { group: "b" }])]!;
      order.push(g);
      fair.took(`${g}-x${i}`, g);
    }
    expect(order.filter((g) => g === "b").length).toBe(3);
  });

  test("a group alone gets every thread (nothing else waits)", () => {
    const fair = new FairScheduler({ weightOf: () => 1 });
    fair.arrived("a");
    expect(fair.pick([{ group: "a" }, { group: "a" }])).toBe(0);
  });

  test("a charge is corrected by the real hold time: long solves count for more", () => {
    let now = 0;
    const fair = new FairScheduler({ weightOf: () => 1, now: () => now, initialHoldMs: 1000 });
    fair.arrived("slow");
    fair.arrived("fast");
    fair.took("s", "slow");
    fair.took("f", "fast");
    now = 200;
    fair.ended("f");
    now = 5000;
    fair.ended("s");
    expect(fair.rank("slow")).toBeGreaterThan(fair.rank("fast"));
    expect(fair.pick([{ group: "slow" }, { group: "fast" }])).toBe(1);
  });
});
