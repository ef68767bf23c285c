import { describe, expect, test } from "bun:test";
import { AimdLimit, capacitySignal } from "./aimd.ts";

const clock = () => {
  let t = 1_000_000;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
};

describe("AimdLimit", () => {
  test("starts at the plan and never goes above it", () => {
    const c = clock();
    const a = new AimdLimit({}, c.now);
    expect(a.limit(10)).toBe(10);
    for (let i = 0; i < 100; i++) a.accepted(10, 10);
    expect(a.limit(10)).toBe(10);
    // A smaller plan caps it at once.
    expect(a.limit(4)).toBe(4);
  });

  test("a congestion signal cuts the limit by the factor, at most once per hold window", () => {
    const c = clock();
    const a = new AimdLimit({ factor: 0.5, holdMs: 2000 }, c.now);
    expect(a.congested(20)).toBe(true);
    expect(a.limit(20)).toBe(10);
    // The rest of the burst: one signal.
    c.advance(1999);
    expect(a.congested(20)).toBe(false);
    expect(a.limit(20)).toBe(10);
    c.advance(1);
    expect(a.congested(20)).toBe(true);
    expect(a.limit(20)).toBe(5);
  });

  test("never goes under the floor", () => {
    const c = clock();
    const a = new AimdLimit({ factor: 0.5, holdMs: 0, floor: 2 }, c.now);
    for (let i = 0; i < 20; i++) a.congested(50);
    expect(a.limit(50)).toBe(2);
    const one = new AimdLimit({ holdMs: 0 }, c.now);
    for (let i = 0; i < 20; i++) one.congested(50);
    expect(one.limit(50)).toBe(1);
  });

  test("grows by one per `limit` successes while the limit is in use", () => {
    const c = clock();
    const a = new AimdLimit({ factor: 0.5 }, c.now);
    a.congested(20); // 10
    for (let i = 0; i < 9; i++) expect(a.accepted(20, 10)).toBe(false);
    expect(a.accepted(20, 10)).toBe(true);
    expect(a.limit(20)).toBe(11);
    for (let i = 0; i < 10; i++) a.accepted(20, 11);
    expect(a.limit(20)).toBe(11);
    a.accepted(20, 11);
    expect(a.limit(20)).toBe(12);
  });

  test("successes while the limit is not in use do not grow it", () => {
    const c = clock();
    const a = new AimdLimit({ factor: 0.5 }, c.now);
    a.congested(20); // 10
    for (let i = 0; i < 1000; i++) a.accepted(20, 9);
    expect(a.limit(20)).toBe(10);
  });

  test("against a capacity C it oscillates in [floor(0.7 (C + 1)), C + 1]", () => {
    const c = clock();
    const a = new AimdLimit({ factor: 0.7, holdMs: 1000 }, c.now);
    const plan = 50;
    const C = 20;
    const seen: number[] = [];
    // Each round: every place of the limit used; the submits past C are refused.
    for (let round = 0; round < 400; round++) {
      const l = a.limit(plan);
      if (round > 50) seen.push(l);
      if (l > C) a.congested(plan);
      else for (let i = 0; i < l; i++) a.accepted(plan, l);
      c.advance(1000);
    }
    expect(Math.max(...seen)).toBe(C + 1);
    expect(Math.min(...seen)).toBe(Math.floor(0.7 * (C + 1)));
  });

  test("refuses a factor outside (0, 1)", () => {
    expect(() => new AimdLimit({ factor: 1 }, Date.now)).toThrow(/factor/);
    expect(() => new AimdLimit({ factor: 0 }, Date.now)).toThrow(/factor/);
  });
});

describe("capacitySignal", () => {
  test("busy, rate limited and timed-out submits are congestion; other errors say nothing", () => {
    expect(capacitySignal({ kind: "ok", value: "1" }, "2captcha")).toBe("accepted");
    expect(capacitySignal({ kind: "error", code: "ERROR_NO_SLOT_AVAILABLE" }, "2captcha")).toBe("congested");
    expect(capacitySignal({ kind: "error", code: "ERROR_TOO_MUCH_REQUESTS" }, "2captcha")).toBe("congested");
    expect(capacitySignal({ kind: "transport", reason: "HTTP 429" }, "2captcha")).toBe("congested");
    expect(capacitySignal({ kind: "transport", reason: "timeout" }, "2captcha")).toBe("congested");
    expect(capacitySignal({ kind: "transport", reason: "HTTP 503" }, "2captcha")).toBe("none");
    expect(capacitySignal({ kind: "error", code: "ERROR_WRONG_USER_KEY" }, "2captcha")).toBe("none");
    expect(capacitySignal({ kind: "not_ready" }, "2captcha")).toBe("none");
    // ERROR_ZERO_BALANCE: no free threads at CaptchaAI, no funds at 2Captcha.
    expect(capacitySignal({ kind: "error", code: "ERROR_ZERO_BALANCE" }, "captchaai")).toBe("congested");
    expect(capacitySignal({ kind: "error", code: "ERROR_ZERO_BALANCE" }, "2captcha")).toBe("none");
  });
});
