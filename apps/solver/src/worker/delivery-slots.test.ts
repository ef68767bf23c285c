import { expect, test } from "bun:test";
import { createSlots, type SlotHold } from "./delivery-slots.ts";

type Slots = ReturnType<typeof createSlots>;
const take = (s: Slots, lane: "high" | "normal" = "normal") => s.acquire(lane, undefined, () => true);
/** A slot handed over at once (not a wait). */
const now = (s: Slots, lane: "high" | "normal" = "normal"): SlotHold => {
  const h = take(s, lane);
  expect(h).not.toBeInstanceOf(Promise);
  expect(h).not.toBe(false);
  return h as SlotHold;
};
const waits = (s: Slots, lane: "high" | "normal" = "normal") => {
  const h = take(s, lane);
  expect(h).toBeInstanceOf(Promise);
  return h as Promise<SlotHold | false>;
};

test("intake: at most `intake` deliveries in their start phase; a parked one makes room for the next, still within the concurrency", async () => {
  const s = createSlots(10, 0, undefined, 3);
  const held = [now(s), now(s), now(s)];
  let got: SlotHold | false | undefined;
  void waits(s).then((h) => (got = h));
  await Bun.sleep(0);
  expect(got).toBeUndefined();
  held[0]!.started();
  await Bun.sleep(0);
  expect(got).toBeTruthy();
  // started() twice gives no second place.
  held[0]!.started();
  waits(s);
});

test("intake: a delivery that ends in its start phase frees its place and its slot; the concurrency bounds the parked ones", async () => {
  const s = createSlots(4, 0, undefined, 2);
  const a = now(s);
  now(s);
  let third: SlotHold | false | undefined;
  void waits(s).then((h) => (third = h));
  a.release();
  a.release();
  await Bun.sleep(0);
  expect(third).toBeTruthy();
  waits(s);
  // Four parked: the concurrency is spent though no delivery is in its start phase.
  const t = createSlots(4, 0, undefined, 2);
  for (let i = 0; i < 4; i++) now(t).started();
  waits(t);
});

test("intake keeps the high lane's reserve: normal deliveries leave a place for a high one", async () => {
  const s = createSlots(100, 0.25, undefined, 4);
  now(s);
  now(s);
  now(s);
  let normal: SlotHold | false | undefined;
  void waits(s).then((h) => (normal = h));
  // Served at once, past the waiting normal one (which stays waiting).
  expect(await take(s, "high")).toBeTruthy();
  await Bun.sleep(0);
  expect(normal).toBeUndefined();
});

test("without an intake bound the concurrency alone limits", () => {
  const s = createSlots(3, 0);
  now(s);
  now(s);
  now(s);
  waits(s);
});
