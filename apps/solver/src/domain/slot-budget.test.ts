import { expect, test } from "bun:test";
import { grantFor, KeyBudget, wantFor } from "./slot-budget.ts";

const facts = { threads: 20, inFlight: 0, othersReserved: 0, blocks: 1, othersStarved: false, carried: 0, want: 5 };

test("a grant is what is asked, within the plan less the provider tasks in flight and the other blocks", () => {
  expect(grantFor(facts)).toBe(5);
  expect(grantFor({ ...facts, want: 50 })).toBe(20);
  expect(grantFor({ ...facts, want: 50, inFlight: 12 })).toBe(8);
  expect(grantFor({ ...facts, want: 50, inFlight: 12, othersReserved: 8 })).toBe(0);
  // A dead solver's provider tasks stay counted (in flight) whoever holds them: nothing over the plan.
  expect(grantFor({ ...facts, want: 50, inFlight: 25 })).toBe(0);
});

test("a grant never drops below what the solver still carries (units the table does not show yet)", () => {
  expect(grantFor({ ...facts, want: 3, inFlight: 20, carried: 3 })).toBe(3);
});

test("while another solver is starved, a grant is capped at a fair share of what the plan has left", () => {
  expect(grantFor({ ...facts, want: 20, blocks: 2, othersStarved: true })).toBe(10);
  expect(grantFor({ ...facts, want: 20, blocks: 3, inFlight: 5, othersStarved: true })).toBe(5);
  expect(grantFor({ ...facts, want: 20, blocks: 2, othersStarved: false })).toBe(20);
});

test("a lease asks for what it carries, the waiting tasks and a spare sized by recent demand; no spare while another starves", () => {
  expect(wantFor({ carried: 2, waiting: 3, takenSinceLease: 0, minSpare: 2, othersStarved: false, threads: 100 })).toBe(
    7,
  );
  expect(
    wantFor({ carried: 2, waiting: 3, takenSinceLease: 40, minSpare: 2, othersStarved: false, threads: 100 }),
  ).toBe(85);
  expect(wantFor({ carried: 2, waiting: 3, takenSinceLease: 40, minSpare: 2, othersStarved: true, threads: 100 })).toBe(
    5,
  );
  expect(
    wantFor({ carried: 2, waiting: 300, takenSinceLease: 40, minSpare: 2, othersStarved: false, threads: 100 }),
  ).toBe(100);
});

function budget(t = { now: 1000 }) {
  return { b: new KeyBudget("key_x", () => t.now), t };
}

test("no unit before the first lease, none past the lease's end, none while a lease is in flight", () => {
  const { b, t } = budget();
  expect(b.tryTake()).toBeUndefined();
  b.leased(b.leaseSent(), 2, 2000);
  expect(b.tryTake()).toBeDefined();
  b.leaseSent();
  expect(b.tryTake()).toBeUndefined();
  b.leaseFailed();
  expect(b.tryTake()).toBeDefined();
  expect(b.tryTake()).toBeUndefined(); // the grant is spent
  b.leased(b.leaseSent(), 5, 2000);
  t.now = 2000;
  expect(b.tryTake()).toBeUndefined();
});

test("a freed unit is back at once; a visible one is the table's after the next lease, counted until then", () => {
  const { b } = budget();
  b.leased(b.leaseSent(), 2, 9000);
  const u1 = b.tryTake()!;
  const u2 = b.tryTake()!;
  expect(b.tryTake()).toBeUndefined();
  u1.free();
  u1.free(); // twice changes nothing
  expect(b.consumed).toBe(1);
  const u3 = b.tryTake()!;
  u2.visible();
  // u3 not visible yet: the next lease carries it; u2 is the table's.
  expect(b.carried()).toBe(1);
  const sent = b.leaseSent();
  u3.visible(); // visible while the lease is in flight: maybe not in its count, still carried
  b.leased(sent, 3, 9000);
  expect(b.consumed).toBe(1);
  u2.free(); // settled: freeing it changes nothing here
  expect(b.consumed).toBe(1);
  b.leased(b.leaseSent(), 3, 9000);
  expect(b.consumed).toBe(0);
});

test("waiting tasks are served in lane order as units come back or a lease grants more; a cancelled wait gets nothing", async () => {
  const { b } = budget();
  b.leased(b.leaseSent(), 1, 9000);
  const held = b.tryTake()!;
  const low = b.wait("low");
  const normal = b.wait("normal");
  const high = b.wait("high");
  const gone = b.wait("high");
  gone.cancel();
  expect(await gone.promise).toBeUndefined();
  held.free();
  expect(await high.promise).toBeDefined();
  b.leased(b.leaseSent(), 3, 9000);
  // The grant of 3 covers the high unit (carried) and two more: normal first, then low.
  expect(await normal.promise).toBeDefined();
  expect(await low.promise).toBeDefined();
  expect(b.consumed).toBe(3);
  b.endWaits();
});

test("a budget is idle once nothing is carried or waiting and no unit was taken for the given time", () => {
  const { b, t } = budget();
  b.leased(b.leaseSent(), 2, 99_000);
  expect(b.idle(1000)).toBe(false);
  const u = b.tryTake()!;
  t.now += 2000;
  expect(b.idle(1000)).toBe(false); // it carries a unit the table does not show yet
  u.visible();
  b.leased(b.leaseSent(), 2, 99_000);
  expect(b.idle(1000)).toBe(true);
  b.tryTake();
  expect(b.idle(1000)).toBe(false);
});

test("within a lane, a freed unit goes to the waiter of the lowest fair-share rank; the high lane first still", async () => {
  const ranks: Record<string, number> = { big: 10, small: 1 };
  const b = new KeyBudget(
    "key_x",
    () => 1000,
    (g) => ranks[g ?? ""] ?? 0,
  );
  b.leased(b.leaseSent(), 1, 9000);
  const held = b.tryTake()!;
  const served: string[] = [];
  const wait = (lane: "high" | "normal", group: string) =>
    b.wait(lane, { group, took: () => {} }).promise.then((u) => {
      served.push(`${lane}:${group}`);
      return u;
    });
  const w1 = wait("normal", "big");
  const w2 = wait("normal", "small");
  const w3 = wait("high", "big");
  held.free();
  const u = await w3;
  expect(served).toEqual(["high:big"]);
  u!.free();
  const v = await w2;
  expect(served).toEqual(["high:big", "normal:small"]);
  v!.free();
  await w1;
  expect(served).toEqual(["high:big", "normal:small", "normal:big"]);
});

test("units handed out together are charged one by one: the ranks move between them", () => {
  const charged: Record<string, number> = { big: 0, small: 0 };
  // A unit costs the big group 3, the small one 1 (weights 1 and 3).
  const b = new KeyBudget(
    "key_x",
    () => 1000,
    (g) => charged[g!]!,
  );
  const got: string[] = [];
  for (let i = 0; i < 4; i++)
    for (const group of ["big", "small"])
      void b
        .wait("normal", { group, took: () => void (charged[group]! += group === "big" ? 3 : 1) })
        .promise.then(() => got.push(group));
  b.leased(b.leaseSent(), 8, 9000);
  return Promise.resolve().then(() => {
    // Ranks big 0, small 0: big (first); then small 1, 2, 3 (rank < 3); then big and small alternate by rank.
    expect(got.slice(0, 4)).toEqual(["big", "small", "small", "small"]);
  });
});
