import { expect, test } from "bun:test";
import { createWaitLimits } from "./wait-limits.ts";

test("a key gets at most perKey slots; others still get theirs until the total is reached", () => {
  const l = createWaitLimits({ perKey: 2, total: 3 });
  const a1 = l.enter("a");
  const a2 = l.enter("a");
  expect(a1 && a2).toBeTruthy();
  expect(l.enter("a")).toBeUndefined();
  const b1 = l.enter("b");
  expect(b1).toBeTruthy();
  expect(l.enter("c")).toBeUndefined(); // total reached
  a1!();
  a1!(); // giving back twice counts once
  expect(l.inUse("a")).toBe(1);
  expect(l.inUse()).toBe(2);
  expect(l.enter("c")).toBeTruthy();
});
