import { expect, test } from "bun:test";
import { createBreaker } from "./breaker.ts";

const opts = { failureRate: 0.5, minCalls: 4, windowMs: 10_000, cooldownMs: 1000, maxCooldownMs: 8000 };

test("opens when the failure ratio over the window reaches the threshold", () => {
  let t = 0;
  const changes: string[] = [];
  const b = createBreaker(
    opts,
    () => t,
    (s) => changes.push(s),
  );
  b.success();
  b.failure();
  b.success();
  expect(b.allows()).toBe(true);
  b.failure(); // 2/4 failed
  expect(b.state()).toBe("open");
  expect(b.allows()).toBe(false);
  expect(b.retryInMs()).toBe(1000);
  t = 1000;
  expect(b.state()).toBe("half_open");
  expect(b.allows()).toBe(false);
  b.probed(true);
  expect(b.allows()).toBe(true);
  expect(changes).toEqual(["open", "half_open", "closed"]);
});

test("old calls leave the window", () => {
  let t = 0;
  const b = createBreaker(opts, () => t);
  b.failure();
  b.failure();
  b.failure();
  t = 20_000;
  b.success();
  b.success();
  b.success();
  b.failure();
  expect(b.state()).toBe("closed");
});

test("a key-level error opens at once; failed probes double the cooldown up to the cap", () => {
  let t = 0;
  const b = createBreaker(opts, () => t);
  b.keyStopped("ERROR_WRONG_USER_KEY");
  expect(b.state()).toBe("open");
  expect(b.reason()).toBe("ERROR_WRONG_USER_KEY");
  for (const expected of [2000, 4000, 8000, 8000]) {
    t += b.retryInMs();
    b.probed(false);
    expect(b.retryInMs()).toBe(expected);
  }
  t += b.retryInMs();
  b.probed(true);
  expect(b.state()).toBe("closed");
  expect(b.reason()).toBeUndefined();
});
