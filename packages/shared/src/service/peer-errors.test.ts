import { expect, test } from "bun:test";
import { isPeerConnectionError } from "./peer-errors.ts";

test("a reset by the peer is survivable; anything else is not", () => {
  expect(isPeerConnectionError(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }))).toBe(true);
  expect(
    isPeerConnectionError(Object.assign(new Error("write CONNECTION_CLOSED"), { code: "CONNECTION_CLOSED" })),
  ).toBe(true);
  expect(isPeerConnectionError(new TypeError("x is undefined"))).toBe(false);
  expect(isPeerConnectionError(Object.assign(new Error("disk"), { code: "ENOSPC" }))).toBe(false);
  expect(isPeerConnectionError(undefined)).toBe(false);
});
