import { expect, test } from "bun:test";
import { assertRegion, laneFilter, shardOf, taskSubject } from "./subjects.ts";

test("a task's shard is stable and within range", () => {
  const id = "0190a000-0000-7000-8000-000000000001";
  expect(shardOf(id)).toBe(shardOf(id));
  const seen = new Set<number>();
  for (let i = 0; i < 2000; i++) seen.add(shardOf(crypto.randomUUID(), 16));
  expect([...seen].every((s) => s >= 0 && s < 16)).toBe(true);
  expect(seen.size).toBe(16);
});

test("subjects are built, not spelled", () => {
  expect(taskSubject("eu", "high", 3)).toBe("tasks.eu.high.3");
  expect(laneFilter("eu", "low")).toBe("tasks.eu.low.*");
  expect(() => assertRegion("eu.west")).toThrow();
});
