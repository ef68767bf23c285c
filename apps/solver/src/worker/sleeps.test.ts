import { expect, test } from "bun:test";
import { createSleeper } from "./sleeps.ts";

test("sleeps wake in order of their end, each after its own delay", async () => {
  const { sleep, pending } = createSleeper();
  const ctl = new AbortController();
  const order: number[] = [];
  const t0 = performance.now();
  const woke: Record<number, number> = {};
  await Promise.all(
    [60, 10, 40, 0, 25, 10].map((ms, i) =>
      sleep(ms, ctl.signal).then(() => {
        order.push(ms);
        woke[i] = performance.now() - t0;
      }),
    ),
  );
  expect(order).toEqual([0, 10, 10, 25, 40, 60]);
  [60, 10, 40, 0, 25, 10].forEach((ms, i) => expect(woke[i]!).toBeGreaterThanOrEqual(ms - 1));
  expect(pending()).toBe(0);
});

test("an abort rejects the sleeps of that signal only, at once, with its reason", async () => {
  const { sleep, pending } = createSleeper();
  const a = new AbortController();
  const b = new AbortController();
  const t0 = performance.now();
  const ofA = [sleep(5_000, a.signal), sleep(10_000, a.signal)].map((p) =>
    p.then(
      () => "woke",
      (e: Error) => e.message,
    ),
  );
  const ofB = sleep(30, b.signal).then(() => "woke");
  a.abort(new Error("shutdown"));
  expect(await Promise.all(ofA)).toEqual(["shutdown", "shutdown"]);
  expect(performance.now() - t0).toBeLessThan(1000);
  expect(await ofB).toBe("woke");
  expect(pending()).toBe(0);
  // An aborted signal rejects at once.
  expect(
    await sleep(10, a.signal).then(
      () => "woke",
      (e: Error) => e.message,
    ),
  ).toBe("shutdown");
});

test("a sleep added with an earlier end than the armed one wakes on time", async () => {
  const { sleep, pending } = createSleeper();
  const ctl = new AbortController();
  const long = sleep(300, ctl.signal);
  const t0 = performance.now();
  await sleep(20, ctl.signal);
  expect(performance.now() - t0).toBeLessThan(200);
  await long;
});

test("after: the record's wake once when due; abort on the signal's abort, never both; a throwing wake goes to abort", async () => {
  const { after, pending } = createSleeper();
  const ctl = new AbortController();
  const calls: string[] = [];
  const record = (name: string, throws = false) => ({
    wake() {
      calls.push(`${name} woke`);
      if (throws) throw new Error("boom");
    },
    abort(reason: unknown) {
      calls.push(`${name} aborted: ${(reason as Error).message}`);
    },
  });
  after(10, ctl.signal, record("a"));
  after(20, ctl.signal, record("b", true));
  after(5_000, ctl.signal, record("c"));
  await Bun.sleep(60);
  expect(calls).toEqual(["a woke", "b woke", "b aborted: boom"]);
  ctl.abort(new Error("shutdown"));
  expect(calls.at(-1)).toBe("c aborted: shutdown");
  expect(pending()).toBe(0);
  // An aborted signal: abort, not at once (the caller's own call returns first), and no wake.
  after(0, ctl.signal, record("d"));
  expect(calls).toHaveLength(4);
  await Bun.sleep(20);
  expect(calls.slice(4)).toEqual(["d aborted: shutdown"]);
});
