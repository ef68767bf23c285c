import { describe, expect, test } from "bun:test";
import { canonicalJson, deriveTaskId, requestHash, validIdempotencyKey } from "./task-id.ts";

describe("task id", () => {
  test("the same client and Idempotency-Key always give the same id", () => {
    expect(deriveTaskId("c1", "k-1")).toBe(deriveTaskId("c1", "k-1"));
    expect(deriveTaskId("c1", "k-1")).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
  test("another client with the same key gets another id", () => {
    expect(deriveTaskId("c1", "k-1")).not.toBe(deriveTaskId("c2", "k-1"));
  });
  test("without a key every request gets a fresh time-ordered id", () => {
    const a = deriveTaskId("c1", undefined);
    const b = deriveTaskId("c1", undefined);
    expect(a).not.toBe(b);
    expect(a[14]).toBe("7");
  });
  test("request hash ignores key order, not values", () => {
    expect(requestHash({ a: 1, b: { c: 2, d: 3 } })).toBe(requestHash({ b: { d: 3, c: 2 }, a: 1 }));
    expect(requestHash({ a: 1 })).not.toBe(requestHash({ a: 2 }));
    expect(canonicalJson({ b: [1, { y: 1, x: 2 }], a: undefined })).toBe('{"b":[1,{"x":2,"y":1}]}');
  });
  test("idempotency keys are 1-255 visible ASCII characters", () => {
    expect(validIdempotencyKey("order-42")).toBe(true);
    expect(validIdempotencyKey("")).toBe(false);
    expect(validIdempotencyKey("has space")).toBe(false);
    expect(validIdempotencyKey("x".repeat(256))).toBe(false);
  });
});
