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
  const g = startMemoryGovernor({
    checkMs: 5,
    growthBytes: 0,
    rss: () => (rss += 1000),
    collect: () => void collected++,
  });
  await Bun.sleep(30);
  g.stop();
  expect(collected).toBe(0);
});

test("above the soft limit the governor collects after the smaller growth", async () => {
  let rss = 100;
  let collected = 0;
  const g = startMemoryGovernor({
    checkMs: 5,
    growthBytes: 10,
    softLimitBytes: 150,
    growthAboveLimitBytes: 2,
    rss: () => rss,
    collect: () => void collected++,
  });
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

test("a soft limit that does not apply now (too few tasks in flight) leaves the growth rule alone", async () => {
  let rss = 100;
  let collected = 0;
  let applies = false;
  const g = startMemoryGovernor({
    checkMs: 5,
    growthBytes: 10,
    softLimitBytes: 101,
    growthAboveLimitBytes: 2,
    softLimitApplies: () => applies,
    rss: () => rss,
    collect: () => void collected++,
  });
  try {
    rss = 105; // above the limit, 5 of growth: the limit does not apply, 5 < 10
    await Bun.sleep(30);
    expect(collected).toBe(0);
    applies = true; // now it does: 5 >= 2
    await Bun.sleep(30);
    expect(collected).toBe(1);
  } finally {
    g.stop();
  }
});

test("above the soft limit the small threshold is rate-limited to the CPU share; the large one is not", async () => {
  let clock = 0;
  let rss = 200;
  let collected = 0;
  const g = startMemoryGovernor({
    checkMs: 2,
    growthBytes: 50,
    softLimitBytes: 150,
    growthAboveLimitBytes: 2,
    maxCpuShareAboveLimit: 0.25,
    now: () => clock,
    rss: () => rss,
    collect: () => {
      collected++;
      clock += 10; // 10 ms each: the next small-threshold collection may start 40 ms after this one began
    },
  });
  try {
    rss = 203;
    await Bun.sleep(20);
    expect(collected).toBe(1); // at clock 0
    rss = 206; // grown 3 above the floor (203), but within the budget window (until 40)
    clock = 30;
    await Bun.sleep(20);
    expect(collected).toBe(1);
    clock = 40;
    await Bun.sleep(20);
    expect(collected).toBe(2);
    // A growth past the large threshold is collected whatever the budget says.
    rss = 300;
    clock = 55;
    await Bun.sleep(20);
    expect(collected).toBe(3);
  } finally {
    g.stop();
  }
});
