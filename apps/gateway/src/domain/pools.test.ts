import { describe, expect, test } from "bun:test";
import { fieldErrors } from "@pipeline/shared/schemas";
import {
  POOL_BACKOFF_MAX_MS,
  PoolBody,
  planRefill,
  poolConfig,
  poolFigures,
  refillBackoffMs,
  refillLeadMs,
} from "./pools.ts";

const NOW = 1_000_000_000;
/** No failures: the plain refill. */
const OK = { failedStreak: 0, lastFailedAtMs: null };
const TICK = 1000;
const turnstile = { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/login" };

describe("planRefill", () => {
  test("an empty pool starts size tasks", () => {
    expect(
      planRefill({ ...OK, size: 3, maxAgeMs: 290_000, readySolvedAt: [], inProgress: 0 }, NOW, 10_000, TICK),
    ).toEqual({
      lasting: 0,
      submit: 3,
    });
  });

  test("tasks in flight count: never more than size of them", () => {
    expect(
      planRefill({ ...OK, size: 3, maxAgeMs: 290_000, readySolvedAt: [], inProgress: 2 }, NOW, 10_000, TICK).submit,
    ).toBe(1);
    expect(
      planRefill({ ...OK, size: 3, maxAgeMs: 290_000, readySolvedAt: [], inProgress: 3 }, NOW, 10_000, TICK).submit,
    ).toBe(0);
    expect(
      planRefill({ ...OK, size: 3, maxAgeMs: 290_000, readySolvedAt: [NOW], inProgress: 5 }, NOW, 10_000, TICK).submit,
    ).toBe(0);
  });

  test("a full pool of fresh tokens starts nothing", () => {
    const p = { size: 3, maxAgeMs: 110_000, readySolvedAt: [NOW - 1000, NOW - 5000, NOW], inProgress: 0 };
    expect(planRefill({ ...OK, ...p }, NOW, 20_000, TICK)).toEqual({ lasting: 3, submit: 0 });
  });

  test("a token that expires within the lead is replaced now, while it is still ready", () => {
    // Solved 95 s ago with a 110 s max age: 15 s left, a replacement takes 20 s.
    const p = { size: 3, maxAgeMs: 110_000, readySolvedAt: [NOW - 95_000, NOW - 5000, NOW], inProgress: 0 };
    expect(planRefill({ ...OK, ...p }, NOW, 20_000, TICK)).toEqual({ lasting: 2, submit: 1 });
    // Its replacement in flight: nothing more.
    expect(planRefill({ ...OK, ...p, inProgress: 1 }, NOW, 20_000, TICK).submit).toBe(0);
    // 25 s left: not yet.
    expect(planRefill({ ...OK, ...p, readySolvedAt: [NOW - 85_000, NOW, NOW] }, NOW, 20_000, TICK).submit).toBe(0);
  });

  test("the boundary: exactly the lead left is not lasting", () => {
    const p = { size: 1, maxAgeMs: 100_000, readySolvedAt: [NOW - 80_000], inProgress: 0 };
    expect(planRefill({ ...OK, ...p }, NOW, 20_000, TICK).submit).toBe(1);
    expect(planRefill({ ...OK, ...p }, NOW, 19_999, TICK).submit).toBe(0);
  });

  test("a lead longer than maxAge: every ready token counts as expiring, size tasks stay in flight", () => {
    const p = { size: 2, maxAgeMs: 5000, readySolvedAt: [NOW, NOW], inProgress: 0 };
    expect(planRefill({ ...OK, ...p }, NOW, 6000, TICK)).toEqual({ lasting: 0, submit: 2 });
  });

  test("a failing pool backs off: after size failures in a row, one probe once the wait after the newest has passed", () => {
    // A wrong sitekey: the three tasks in flight failed at once, the last one 1 s ago.
    const failing = {
      size: 3,
      maxAgeMs: 290_000,
      readySolvedAt: [],
      inProgress: 0,
      failedStreak: 3,
      lastFailedAtMs: NOW - 1000,
    };
    expect(planRefill(failing, NOW, 10_000, TICK)).toEqual({ lasting: 0, submit: 0, backoffUntilMs: NOW + 1000 });
    expect(planRefill(failing, NOW + 1000, 10_000, TICK)).toEqual({
      lasting: 0,
      submit: 1,
      backoffUntilMs: NOW + 1000,
    });
    // The probe in flight: nothing more, whatever the time.
    expect(planRefill({ ...failing, inProgress: 1 }, NOW + 60_000, 10_000, TICK).submit).toBe(0);
    // The probe failed too: the wait doubles, counted from it.
    const probed = { ...failing, failedStreak: 4, lastFailedAtMs: NOW + 5000 };
    expect(planRefill(probed, NOW + 8999, 10_000, TICK).submit).toBe(0);
    expect(planRefill(probed, NOW + 9000, 10_000, TICK)).toEqual({ lasting: 0, submit: 1, backoffUntilMs: NOW + 9000 });
    // Fewer failures in a row than the size (a task now and then the provider cannot solve): the plain refill.
    expect(planRefill({ ...failing, failedStreak: 2 }, NOW, 10_000, TICK)).toEqual({ lasting: 0, submit: 3 });
  });

  test("the backoff: two ticks, doubled by each failed probe, at most five minutes", () => {
    expect(refillBackoffMs(2, 3, 1000)).toBeUndefined();
    expect([3, 4, 5, 6].map((n) => refillBackoffMs(n, 3, 1000))).toEqual([2000, 4000, 8000, 16_000]);
    expect(refillBackoffMs(500, 3, 1000)).toBe(POOL_BACKOFF_MAX_MS);
    expect(refillBackoffMs(1, 1, 200)).toBe(400);
  });

  test("the lead: the measured p90, else the default, plus a tick", () => {
    expect(refillLeadMs(12_000, 60_000, 1000)).toBe(13_000);
    expect(refillLeadMs(undefined, 60_000, 1000)).toBe(61_000);
  });
});

describe("PoolBody", () => {
  const errs = (b: unknown) => {
    const r = PoolBody.safeParse(b);
    return r.success ? [] : fieldErrors(r.error);
  };

  test("defaults: maxAge per type (reCAPTCHA 110 s, Turnstile 290 s), priority normal", () => {
    const t = poolConfig(PoolBody.parse({ type: "turnstile", params: turnstile, size: 3 }));
    expect(t).toEqual({ type: "turnstile", params: turnstile, priority: "normal", size: 3, maxAgeMs: 290_000 });
    const r = poolConfig(
      PoolBody.parse({ type: "recaptcha_v2", params: { sitekey: "6Le-x", pageurl: "https://e.com/" }, size: 1 }),
    );
    expect(r.maxAgeMs).toBe(110_000);
    expect(
      poolConfig(PoolBody.parse({ type: "turnstile", params: turnstile, size: 1, maxAgeSeconds: 5 })).maxAgeMs,
    ).toBe(5000);
  });

  test("a bad body names its field", () => {
    expect(errs({ type: "turnstile", params: turnstile, size: 0 })[0]?.field).toBe("size");
    expect(errs({ type: "turnstile", params: turnstile, size: 51 })[0]?.field).toBe("size");
    expect(errs({ type: "turnstile", params: turnstile, size: 2.5 })[0]?.field).toBe("size");
    expect(errs({ type: "turnstile", params: { pageurl: turnstile.pageurl }, size: 1 })[0]?.field).toBe(
      "params.sitekey",
    );
    expect(errs({ type: "turnstile", params: { ...turnstile, pageurl: "ftp://x" }, size: 1 })[0]?.field).toBe(
      "params.pageurl",
    );
    expect(errs({ type: "image", params: {}, size: 1 })[0]?.field).toBe("type");
    expect(errs({ type: "turnstile", params: turnstile, size: 1, maxAgeSeconds: 301 })).toEqual([
      { field: "maxAgeSeconds", message: "at most 300 for turnstile (the token's life)" },
    ]);
    expect(errs({ type: "recaptcha_v2", params: turnstile, size: 1, maxAgeSeconds: 121 })[0]?.field).toBe(
      "maxAgeSeconds",
    );
    expect(errs({ type: "turnstile", params: turnstile, size: 1, extra: 1 })[0]?.field).toBe("(root)");
  });
});

describe("poolFigures", () => {
  const counts = { solved: 10, handedOut: 4, wasted: 3, inProgress: 2, ready: 3, failed: 0, misses: 1 };

  test("spend is price x solved, cost per token handed out, hit rate of all takes", () => {
    expect(poolFigures(counts, 0.0012)).toEqual({
      ...counts,
      spendMicros: 12_000,
      costPerHandedOutMicros: 3000,
      hitRate: 0.8,
    });
  });

  test("no price, no take: null, never a division by zero", () => {
    const none = { ...counts, handedOut: 0, misses: 0 };
    expect(poolFigures(none, undefined)).toEqual({
      ...none,
      spendMicros: null,
      costPerHandedOutMicros: null,
      hitRate: null,
    });
    expect(poolFigures(none, 0.001).costPerHandedOutMicros).toBeNull();
  });
});
