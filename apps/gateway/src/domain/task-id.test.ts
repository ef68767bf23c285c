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
  test("ids and hashes are the bytes earlier versions stored (node:crypto sha256; retries across a deploy find their task)", () => {
    expect(deriveTaskId("c1", "k-1")).toBe("1936e44b-09ff-839f-88a1-5bf864ad176c");
    expect(deriveTaskId("0123456789abcdef0123456789abcdef", "order-42")).toBe("51699463-9d56-83bf-97f0-a9bfe0108de9");
    expect(deriveTaskId("ü", "k")).toBe("18dccd48-e90c-8d10-b212-bf5f53d50df1");
    expect(
      requestHash({
        type: "turnstile",
        priority: "normal",
        params: { sitekey: "0x4AAA", pageurl: "https://example.com/a?b=ü" },
      }),
    ).toBe("9e5858520a84830586d1992d657fc18d504208a326ac0a603f34d819c5f57e26");
    expect(requestHash({ b: [1, { y: 1, x: 2 }, undefined, null], a: undefined, é: "\u2028" })).toBe(
      "4bdf640a341b14513b9a773fc566d183747b89f3639134279346081ed06c8036",
    );
    expect(requestHash({})).toBe("44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
    expect(canonicalJson([1, undefined, null])).toBe("[1,,null]");
  });
  test("idempotency keys are 1-255 visible ASCII characters", () => {
    expect(validIdempotencyKey("order-42")).toBe(true);
    expect(validIdempotencyKey("")).toBe(false);
    expect(validIdempotencyKey("has space")).toBe(false);
    expect(validIdempotencyKey("x".repeat(256))).toBe(false);
  });
});
