import { expect, test } from "bun:test";
import { homeRegionOf, homeRegionVariants, parseRegions, withHomeRegion } from "./home.ts";

const regions = ["fsn1", "hel1"];

test("an id carries its home region in its last byte; the rest of the id is kept", () => {
  const id = Bun.randomUUIDv7();
  const a = withHomeRegion(id, regions, "fsn1");
  const b = withHomeRegion(id, regions, "hel1");
  expect(a.slice(0, 34)).toBe(id.slice(0, 34));
  expect(homeRegionOf(a, regions)).toBe("fsn1");
  expect(homeRegionOf(b, regions)).toBe("hel1");
  expect(homeRegionVariants(a, regions)).toEqual([a, b]);
});

test("an id from before regions (byte 0) or of an unknown position has no home", () => {
  expect(homeRegionOf("01a23ebc-7c90-7055-a989-67ba5b6be500", regions)).toBeUndefined();
  expect(homeRegionOf("01a23ebc-7c90-7055-a989-67ba5b6be509", regions)).toBeUndefined();
  expect(homeRegionOf("not-an-id", regions)).toBeUndefined();
});

test("REGIONS must list the local region once, as subject tokens", () => {
  expect(parseRegions("fsn1, hel1", "hel1")).toEqual(["fsn1", "hel1"]);
  expect(parseRegions("", "local")).toEqual(["local"]);
  expect(() => parseRegions("fsn1,hel1", "nbg1")).toThrow(/not in REGIONS/);
  expect(() => parseRegions("fsn1,fsn1", "fsn1")).toThrow(/twice/);
  expect(() => parseRegions("fsn1,HEL.1", "fsn1")).toThrow(/subject token/);
});
