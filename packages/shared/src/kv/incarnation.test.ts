import { expect, test } from "bun:test";
import { incarnationId, newIncarnation, workerNameOf } from "./incarnation.ts";

test("an incarnation per start: the name is kept, the id differs, the name reads back", () => {
  const a = newIncarnation(1_765_000_000_000);
  const b = newIncarnation(1_765_000_000_001);
  expect(a).toMatch(/^i[0-9a-z]{10}$/);
  expect(a).not.toBe(b);
  expect(workerNameOf(incarnationId("solver-1", a))).toBe("solver-1");
  expect(workerNameOf(incarnationId("host.example-4711", b))).toBe("host.example-4711");
  // An id from before incarnations (or a name that only looks dotted) is its own name.
  expect(workerNameOf("solver-1")).toBe("solver-1");
  expect(workerNameOf("db.internal")).toBe("db.internal");
});
