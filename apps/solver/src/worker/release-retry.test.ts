import { expect, test } from "bun:test";
import { releaseWithRetry } from "./release-retry.ts";

const connErr = Object.assign(new Error("connection closed"), { code: "CONNECTION_CLOSED" });
const transient = (e: unknown) => (e as { code?: string }).code === "CONNECTION_CLOSED";

/** A clock the sleeps advance, and a release that fails `fails` times with `err` before it goes through. */
function rig(fails: number, err: unknown = connErr) {
  let t = 0;
  const sleeps: number[] = [];
  let calls = 0;
  return {
    sleeps,
    calls: () => calls,
    o: {
      release: async () => {
        calls++;
        if (calls <= fails) throw err;
      },
      transient,
      now: () => t,
      sleep: async (ms: number) => {
        sleeps.push(ms);
        t += ms;
      },
    },
  };
}

test("a release that fails on the connection is tried again, backing off, until it goes through", async () => {
  const r = rig(5);
  expect(await releaseWithRetry({ ...r.o, forMs: 30_000, aborted: () => false })).toBe("released");
  expect(r.calls()).toBe(6);
  expect(r.sleeps).toEqual([100, 200, 400, 800, 1000]);
});

test("it gives up once the lease would have run out by itself", async () => {
  const r = rig(1000);
  expect(await releaseWithRetry({ ...r.o, forMs: 3000, aborted: () => false })).toBe("gave_up");
  // 100 + 200 + 400 + 800 + 1000 = 2500; the next 1000 would pass 3000.
  expect(r.sleeps).toEqual([100, 200, 400, 800, 1000]);
  expect(r.calls()).toBe(6);
});

test("an error that is not the connection's is not retried", async () => {
  const r = rig(1, new Error("syntax error"));
  expect(await releaseWithRetry({ ...r.o, forMs: 30_000, aborted: () => false })).toBe("failed");
  expect(r.calls()).toBe(1);
});

test("a worker shutting down stops trying at once", async () => {
  const r = rig(1000);
  let aborted = false;
  const o = {
    ...r.o,
    sleep: async (ms: number) => {
      await r.o.sleep(ms);
      aborted = r.sleeps.length >= 2;
    },
  };
  expect(await releaseWithRetry({ ...o, forMs: 30_000, aborted: () => aborted })).toBe("gave_up");
  expect(r.calls()).toBe(2);
});
