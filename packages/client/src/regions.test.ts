import { expect, test } from "bun:test";
import { createRegionState, hintedRegions, homeRegionOfId, tryOrder } from "./regions.ts";

test("try order: the first region, then those x-try-regions named, then the rest in order, each once", () => {
  expect(tryOrder(3, 0)).toEqual([0, 1, 2]);
  expect(tryOrder(3, 1)).toEqual([1, 2, 0]);
  expect(tryOrder(3, 0, [2])).toEqual([0, 2, 1]);
  expect(tryOrder(3, 0, [0, 7, 2, 2])).toEqual([0, 2, 1]);
  expect(tryOrder(1, 0, [0])).toEqual([0]);
});

test("x-try-regions names map to configured URLs (trailing slashes aside); unknown names are skipped", () => {
  const urls = ["http://a:1", "http://b:2", "http://c:3"];
  const names = { fsn1: "http://a:1/", hel1: "http://c:3", ash1: "http://elsewhere:9" };
  expect(hintedRegions("hel1", names, urls)).toEqual([2]);
  expect(hintedRegions("ash1, hel1,fsn1", names, urls)).toEqual([2, 0]);
  expect(hintedRegions(null, names, urls)).toEqual([]);
  expect(hintedRegions("hel1", {}, urls)).toEqual([]);
});

test("a task id's last byte names its home region in the shared order", () => {
  const order = ["fsn1", "hel1"];
  expect(homeRegionOfId("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a01", order)).toBe("fsn1");
  expect(homeRegionOfId("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a02", order)).toBe("hel1");
  expect(homeRegionOfId("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a00", order)).toBeUndefined();
  expect(homeRegionOfId("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a09", order)).toBeUndefined();
  expect(homeRegionOfId("not-an-id", order)).toBeUndefined();
});

test("failover moves the active region once; home is probed only after failBackMs, and again failBackMs after a failed probe", () => {
  let now = 1000;
  const s = createRegionState(5000, () => now);
  expect(s.active()).toBe(0);
  expect(s.probeDue()).toBe(false);
  expect(s.failedOver(0, 1)).toBe(true);
  expect(s.failedOver(0, 2)).toBe(false); // a late failure of home moves nothing (already away)
  expect(s.active()).toBe(1);
  now += 4999;
  expect(s.probeDue()).toBe(false);
  now += 1;
  expect(s.probeDue()).toBe(true);
  s.probed(false);
  expect(s.active()).toBe(1);
  expect(s.probeDue()).toBe(false);
  now += 5000;
  expect(s.probeDue()).toBe(true);
  s.probed(true);
  expect(s.active()).toBe(0);
  expect(s.probeDue()).toBe(false);
});
