import { expect, test } from "bun:test";
import {
  assertRegion,
  eventKindOf,
  isFinalEventKind,
  laneFilter,
  shardOf,
  subjectOfEvent,
  taskSubject,
} from "./subjects.ts";

test("a task's shard is stable and within range", () => {
  const id = "0190a000-0000-7000-8000-000000000001";
  expect(shardOf(id)).toBe(shardOf(id));
  const seen = new Set<number>();
  for (let i = 0; i < 2000; i++) seen.add(shardOf(crypto.randomUUID(), 16));
  expect([...seen].every((s) => s >= 0 && s < 16)).toBe(true);
  expect(seen.size).toBe(16);
});

test("a task's shard is the value earlier versions computed (sha256's first 4 bytes, big-endian; node:crypto as the reference)", () => {
  const { createHash } = require("node:crypto") as typeof import("node:crypto");
  const reference = (id: string, n: number) => createHash("sha256").update(id).digest().readUInt32BE(0) % n;
  expect(shardOf("0192b4e2-1234-8abc-9def-0123456789ab")).toBe(8);
  expect(shardOf("ffffffff-ffff-8fff-bfff-ffffffffffff", 7)).toBe(2);
  expect(shardOf("00000000-0000-7000-8000-000000000000", 3)).toBe(1);
  for (let i = 0; i < 2000; i++) {
    const id = crypto.randomUUID();
    for (const n of [16, 3, 7]) expect(shardOf(id, n)).toBe(reference(id, n));
  }
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
  expect(["completed", "failed", "cancelled", "solving", "adopted"].map(isFinalEventKind)).toEqual([
    true,
    true,
    true,
    false,
    false,
  ]);
});
