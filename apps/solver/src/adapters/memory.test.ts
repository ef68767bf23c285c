import { expect, test } from "bun:test";
import { startMemoryGovernor } from "./memory.ts";

test("collects only after the resident set grew by the threshold since the last collection", async () => {
  let rss = 100;
  let collected = 0;
  const g = startMemoryGovernor({
    checkMs: 5,
    growthBytes: 10,
    rss: () => rss,
    collect: () => {
      collected++;
      rss -= 8; // a collection gives some back
    },
  });
  try {
    rss = 109;
    await Bun.sleep(30);
    expect(collected).toBe(0);
    rss = 110;
    await Bun.sleep(30);
    expect(collected).toBe(1);
    expect(g.collections()).toBe(1);
    // The floor is now 102 (after the collection): 111 is not yet 10 above it.
    rss = 111;
    await Bun.sleep(30);
    expect(collected).toBe(1);
    // Memory given back on its own lowers the floor.
    rss = 50;
    await Bun.sleep(30);
    rss = 60;
    await Bun.sleep(30);
    expect(collected).toBe(2);
  } finally {
    g.stop();
  }
});

test("a threshold of 0 never collects", async () => {
  let collected = 0;
  let rss = 0;
  const g = startMemoryGovernor({ checkMs: 5, growthBytes: 0, rss: () => (rss += 1000), collect: () => void collected++ });
  await Bun.sleep(30);
  g.stop();
  expect(collected).toBe(0);
});

test("above the soft limit the governor collects after the smaller growth", async () => {
  let rss = 100;
  let collected = 0;
  const g = startMemoryGovernor({ checkMs: 5, growthBytes: 10, softLimitBytes: 150, growthAboveLimitBytes: 2, rss: () => rss, collect: () => void collected++ });
  try {
    rss = 105; // below the limit: 5 < 10
    await Bun.sleep(30);
    expect(collected).toBe(0);
    rss = 152; // above it: grown 52 since the floor
    await Bun.sleep(30);
    expect(collected).toBe(1);
    rss = 153; // 1 above the new floor (152): not yet
    await Bun.sleep(30);
    expect(collected).toBe(1);
    rss = 154;
    await Bun.sleep(30);
    expect(collected).toBe(2);
  } finally {
    g.stop();
  }
});
