import { expect, test } from "bun:test";
import { assertRegion, eventKindOf, isFinalEventKind, laneFilter, shardOf, subjectOfEvent, taskSubject } from "./subjects.ts";

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

test("a final event of a task with a callback goes to its hook subject; the kind reads back from either form", () => {
  expect(subjectOfEvent("fsn1", { kind: "completed", data: { callback: true } })).toBe("events.fsn1.completed.hook");
  expect(subjectOfEvent("fsn1", { kind: "completed", data: { callback: false } })).toBe("events.fsn1.completed");
  expect(subjectOfEvent("fsn1", { kind: "solving", data: { callback: true } })).toBe("events.fsn1.solving");
  expect(eventKindOf("events.fsn1.completed.hook")).toBe("completed");
  expect(eventKindOf("events.fsn1.solving")).toBe("solving");
  expect(["completed", "failed", "cancelled", "solving", "adopted"].map(isFinalEventKind)).toEqual([true, true, true, false, false]);
});
