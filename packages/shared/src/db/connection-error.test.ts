import { expect, test } from "bun:test";
import { isConnectionError } from "./index.ts";

test("connection-class failures (also wrapped in a cause) are told apart from query errors", () => {
  expect(isConnectionError(Object.assign(new Error("write CONNECTION_CLOSED"), { code: "CONNECTION_CLOSED" }))).toBe(
    true,
  );
  expect(
    isConnectionError(
      Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" }),
    ),
  ).toBe(true);
  expect(
    isConnectionError(new Error("Failed query", { cause: Object.assign(new Error("reset"), { code: "ECONNRESET" }) })),
  ).toBe(true);
  expect(isConnectionError(Object.assign(new Error("duplicate key"), { code: "23505" }))).toBe(false);
  expect(isConnectionError(new Error("plain"))).toBe(false);
  expect(isConnectionError(undefined)).toBe(false);
});
