import { describe, expect, test } from "bun:test";
import {
  idleSubject,
  initialAssignment,
  laneFilters,
  moveShards,
  ownedShards,
  ShardAssignment,
  shardsToReach,
  shareOf,
} from "./assignment.ts";

const now = new Date("2026-12-04T00:00:00Z");

describe("shard assignment", () => {
  test("the first version of a region owns every shard", () => {
    const a = initialAssignment("v1", "test", 16, now);
    expect(ownedShards(a, "v1")).toHaveLength(16);
    expect(shareOf(a)).toEqual({ v1: 16 });
  });

  test("a move gives shards to another version; each shard has exactly one owner", () => {
    const a = moveShards(initialAssignment("v1", "t", 16, now), [0, 5], "v2", "t", now);
    expect(ownedShards(a, "v2")).toEqual([0, 5]);
    expect(ownedShards(a, "v1")).toHaveLength(14);
    expect(a.owners).toHaveLength(16);
    expect(() => moveShards(a, [16], "v2", "t")).toThrow("no shard 16");
    expect(() => moveShards(a, [1], "V2!", "t")).toThrow();
  });

  test("reaching a share takes shards from the others, lowest first, and never gives any back", () => {
    const a = initialAssignment("v1", "t", 16, now);
    expect(shardsToReach(a, "v2", 4)).toEqual([0, 1, 2, 3]);
    const b = moveShards(a, [0, 1, 2, 3], "v2", "t", now);
    expect(shardsToReach(b, "v2", 8)).toEqual([4, 5, 6, 7]);
    expect(shardsToReach(b, "v2", 2)).toEqual([]);
  });

  test("a version with shards filters their subjects; one without, a subject nobody publishes", () => {
    expect(laneFilters("fsn1", "high", "v1", [0, 3])).toEqual(["tasks.fsn1.high.0", "tasks.fsn1.high.3"]);
    expect(laneFilters("fsn1", "low", "v2", [])).toEqual([idleSubject("fsn1", "low", "v2")]);
    expect(idleSubject("fsn1", "low", "v2")).toBe("tasks.fsn1.low.idle_v2");
  });

  test("a stored assignment is parsed strictly", () => {
    expect(ShardAssignment.safeParse({ owners: ["v1"], updatedAt: "x", by: "t", extra: 1 }).success).toBe(false);
    expect(ShardAssignment.safeParse({ owners: [], updatedAt: "x", by: "t" }).success).toBe(false);
  });
});
