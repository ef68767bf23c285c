import { describe, expect, test } from "bun:test";
import { fingerprintOf } from "./fingerprint.ts";

describe("fingerprintOf", () => {
  const task = { googlekey: "6Lc", pageurl: "https://example.test/login" };

  test("is 16 lowercase hex chars", () => {
    expect(fingerprintOf("userrecaptcha", task)).toMatch(/^[0-9a-f]{16}$/);
  });

  test("ignores param order", () => {
    expect(fingerprintOf("userrecaptcha", { pageurl: task.pageurl, googlekey: task.googlekey })).toBe(
      fingerprintOf("userrecaptcha", task),
    );
  });

  test("ignores key, json, soft_id, header_acao, pingback and a method entry", () => {
    const noisy = {
      ...task,
      key: "k",
      json: "1",
      soft_id: "4587",
      header_acao: "1",
      pingback: "https://cb",
      method: "userrecaptcha",
    };
    expect(fingerprintOf("userrecaptcha", noisy)).toBe(fingerprintOf("userrecaptcha", task));
  });

  test("differs by method and by any task param", () => {
    const base = fingerprintOf("userrecaptcha", task);
    expect(fingerprintOf("turnstile", task)).not.toBe(base);
    expect(fingerprintOf("userrecaptcha", { ...task, version: "v3" })).not.toBe(base);
    expect(fingerprintOf("userrecaptcha", { ...task, pageurl: "https://example.test/other" })).not.toBe(base);
  });
});
