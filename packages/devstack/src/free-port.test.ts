import { expect, test } from "bun:test";
import { freePort, reservePort } from "./free-port.ts";

test("a port handed out is reserved machine-wide for 2 minutes, then free to hand out again", async () => {
  const port = await freePort();
  expect(reservePort(port)).toBe(false); // another caller (any process) is refused it
  expect(reservePort(port, Date.now() + 121_000)).toBe(true); // an old reservation is taken over
  expect(reservePort(port)).toBe(false);
});
