import { describe, expect, test } from "bun:test";
import { createProviderWindow } from "./provider-window.ts";

const busy = { kind: "error", code: "ERROR_NO_SLOT_AVAILABLE" } as const;
const ok = { kind: "ok", value: "1" } as const;

function windowOf(plan: number) {
  let t = 0;
  const changes: string[] = [];
  const w = createProviderWindow({
    planOf: () => plan,
    profile: "2captcha",
    factor: 0.5,
    holdMs: 1000,
    now: () => t,
    onChange: (k, from, to, why) => changes.push(`${k} ${why} ${from}->${to}`),
  });
  return { w, changes, advance: (ms: number) => void (t += ms) };
}

describe("provider window", () => {
  test("places up to the limit at once; over it a task waits for a freed place", async () => {
    const { w } = windowOf(2);
    expect(await w.enter("a", "t1", "normal", 0)).toBe(true);
    expect(await w.enter("a", "t2", "normal", 0)).toBe(true);
    expect(w.atLimit("a")).toBe(true);
    expect(await w.enter("a", "t3", "normal", 0)).toBe(false);
    const waiting = w.enter("a", "t3", "normal", 5000);
    w.leave("t1");
    expect(await waiting).toBe(true);
    expect(w.limits().a).toEqual({ limit: 2, plan: 2, held: 2 });
  });

  test("a wait ends false after its time, on abort and when the waits are ended", async () => {
    const { w } = windowOf(1);
    await w.enter("a", "t1", "normal", 0);
    expect(await w.enter("a", "t2", "normal", 20)).toBe(false);
    const ac = new AbortController();
    const aborted = w.enter("a", "t3", "normal", 5000, ac.signal);
    ac.abort();
    expect(await aborted).toBe(false);
    const ended = w.enter("a", "t4", "normal", 5000);
    w.endWaits();
    expect(await ended).toBe(false);
    // Nothing was taken by the tasks that gave up.
    expect(w.limits().a?.held).toBe(1);
  });

  test("freed places go to the high lane first", async () => {
    const { w } = windowOf(1);
    await w.enter("a", "t1", "normal", 0);
    const order: string[] = [];
    const low = w.enter("a", "low", "low", 5000).then(() => order.push("low"));
    const high = w.enter("a", "high", "high", 5000).then(() => order.push("high"));
    w.leave("t1");
    await high;
    w.leave("high");
    await low;
    expect(order).toEqual(["high", "low"]);
  });

  test("rejections cut the limit (one cut per burst), successes at the limit raise it back", async () => {
    const { w, changes, advance } = windowOf(8);
    for (let i = 0; i < 8; i++) await w.enter("a", `t${i}`, "normal", 0);
    for (let i = 0; i < 5; i++) w.observe("a", busy);
    expect(w.limits().a?.limit).toBe(4);
    expect(changes).toEqual(["a decrease 8->4"]);
    // Held (8) is over the limit (4): no new place until four leave.
    expect(await w.enter("a", "new", "normal", 0)).toBe(false);
    for (let i = 0; i < 4; i++) w.leave(`t${i}`);
    expect(w.atLimit("a")).toBe(true);
    // Four successes while the four places are in use: +1.
    for (let i = 0; i < 4; i++) w.observe("a", ok);
    expect(w.limits().a?.limit).toBe(5);
    expect(await w.enter("a", "new", "normal", 0)).toBe(true);
    advance(1000);
    w.observe("a", { kind: "transport", reason: "timeout" });
    expect(w.limits().a?.limit).toBe(2);
  });

  test("a raised limit serves a waiting task at once", async () => {
    const { w, advance } = windowOf(4);
    for (let i = 0; i < 4; i++) await w.enter("a", `t${i}`, "normal", 0);
    w.observe("a", busy); // 2
    advance(2000);
    w.leave("t0");
    w.leave("t1");
    const waiting = w.enter("a", "w", "normal", 5000);
    w.observe("a", ok);
    w.observe("a", ok); // 3
    expect(await waiting).toBe(true);
  });

  test("hold moves a place between accounts, or takes one over the limit", async () => {
    const { w } = windowOf(1);
    await w.enter("a", "t1", "normal", 0);
    const waiting = w.enter("a", "t2", "normal", 5000);
    w.hold("t1", "b");
    expect(await waiting).toBe(true);
    w.hold("t3", "b");
    expect(w.limits()).toEqual({ a: { limit: 1, plan: 1, held: 1 }, b: { limit: 1, plan: 1, held: 2 } });
    w.leave("t3");
    w.leave("t3");
    expect(w.limits().b?.held).toBe(1);
  });
});
