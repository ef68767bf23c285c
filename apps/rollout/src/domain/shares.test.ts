import { expect, test } from "bun:test";
import { shardCount, shardsForPercent } from "./shares.ts";

test("a share is a number of shards or a percentage of them (rounded up, at least one)", () => {
  expect(shardCount("4", 16)).toBe(4);
  expect(shardCount("25%", 16)).toBe(4);
  expect(shardCount("5%", 16)).toBe(1);
  expect(shardCount("0%", 16)).toBe(0);
  expect(shardCount("100%", 16)).toBe(16);
  expect(() => shardCount("17", 16)).toThrow("16 shards");
  expect(() => shardCount("120%", 16)).toThrow("at most 100%");
  expect(() => shardCount("a lot", 16)).toThrow("a number of shards");
});

test("a percentage as a number means the same shards as its spelling", () => {
  for (const p of [0, 1, 5, 25, 33, 50, 100]) expect(shardsForPercent(p, 16)).toBe(shardCount(`${p}%`, 16));
  expect(() => shardsForPercent(101, 16)).toThrow("0 to 100");
  expect(() => shardsForPercent(2.5, 16)).toThrow("whole percentage");
});
