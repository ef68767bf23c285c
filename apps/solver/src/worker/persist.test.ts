import { afterEach, expect, setSystemTime, test } from "bun:test";
import { persist } from "./persist.ts";
import type { Sleeper } from "./sleeps.ts";

const connErr = Object.assign(new Error("connection closed"), { code: "CONNECTION_CLOSED" });
const retryable = (e: unknown) => (e as { code?: string }).code === "CONNECTION_CLOSED";
afterEach(() => setSystemTime());

/** A sleeper that moves the clock on instead of waiting, and a write that fails `fails` times with `err` first. */
function rig(fails: number, err: unknown = connErr, onSleep: (n: number) => void = () => {}) {
  let t = Date.parse("2026-12-07T12:00:00Z");
  setSystemTime(t);
  const sleeps: number[] = [];
  let calls = 0;
  const sleeper = {
    sleep: async (ms: number, signal: AbortSignal) => {
      signal.throwIfAborted();
      sleeps.push(ms);
      t += ms;
      setSystemTime(t);
      onSleep(sleeps.length);
      // An abort during the sleep rejects it, as the real sleeper does.
      signal.throwIfAborted();
    },
  } as unknown as Sleeper;
  const write = async () => {
    calls++;
    if (calls <= fails) throw err;
    return "written";
  };
  return { sleeps, calls: () => calls, sleeper, write };
}

test("a write that fails on the connection is tried again, backing off to maxMs, until it goes through", async () => {
  const r = rig(5);
  const signal = new AbortController().signal;
  expect(await persist(r.write, 30_000, r.sleeper, signal, { maxMs: 1000, retryable })).toBe("written");
  expect(r.calls()).toBe(6);
  expect(r.sleeps).toEqual([100, 200, 400, 800, 1000]);
});

test("it gives up (rethrows) once forMs would pass: the release's lease runs out by itself then", async () => {
  const r = rig(1000);
  const signal = new AbortController().signal;
  await expect(persist(r.write, 3000, r.sleeper, signal, { maxMs: 1000, retryable })).rejects.toBe(connErr);
  // 100 + 200 + 400 + 800 + 1000 = 2500; the next 1000 would pass 3000.
  expect(r.sleeps).toEqual([100, 200, 400, 800, 1000]);
  expect(r.calls()).toBe(6);
});

test("an error retryable refuses is not retried", async () => {
  const other = new Error("syntax error");
  const r = rig(1, other);
  const signal = new AbortController().signal;
  await expect(persist(r.write, 30_000, r.sleeper, signal, { retryable })).rejects.toBe(other);
  expect(r.calls()).toBe(1);
});

test("a worker shutting down stops trying at once", async () => {
  const stop = new AbortController();
  const r = rig(1000, connErr, (n) => n >= 2 && stop.abort(new Error("hard stop")));
  await expect(persist(r.write, 30_000, r.sleeper, stop.signal, { retryable })).rejects.toThrow("hard stop");
  expect(r.calls()).toBe(2);
});
