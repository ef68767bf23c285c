import { expect, test } from "bun:test";
import { PULL_EXPIRES_MAX_MS, PULL_EXPIRES_MIN_MS, pullExpiresMs } from "./pull-expiry.ts";

test("a pull expires before the reaper can act on a solver cut off right after a pull: DEAD_AFTER_MS less a beat less a margin", () => {
  // Defaults: DEAD_AFTER_MS 6 s, a heartbeat every 2 s: the reaper acts 4 s after the cut at the
  // earliest; a pull sent at the cut is gone after 3 s.
  expect(pullExpiresMs(6000, 2000)).toBe(3000);
  for (const dead of [4000, 6000, 9000])
    expect(pullExpiresMs(dead, 2000)).toBeLessThanOrEqual(Math.max(PULL_EXPIRES_MIN_MS, dead - 2000 - 1000));
});

test("never longer than 5 s (a lost pull noticed in seconds), never shorter than the client allows, 5 s with the reaper off", () => {
  expect(pullExpiresMs(60_000, 2000)).toBe(PULL_EXPIRES_MAX_MS);
  expect(pullExpiresMs(2500, 2000)).toBe(PULL_EXPIRES_MIN_MS);
  expect(pullExpiresMs(0, 2000)).toBe(PULL_EXPIRES_MAX_MS);
});
