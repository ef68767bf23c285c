import { expect, test } from "bun:test";
import { createPermits } from "./permits.ts";

test("at most `max` holders at once; waiters get permits in order as they are released", async () => {
  const p = createPermits(2);
  let holding = 0;
  let most = 0;
  const order: number[] = [];
  await Promise.all(
    Array.from({ length: 6 }, async (_, i) => {
      await p.acquire();
      holding++;
      most = Math.max(most, holding);
      order.push(i);
      await Bun.sleep(5);
      holding--;
      p.release();
    }),
  );
  expect(most).toBe(2);
  expect(order).toEqual([0, 1, 2, 3, 4, 5]);
});

test("with a fair-share rank, a freed permit goes to the lowest-ranked waiter (first come among equals)", async () => {
  const ranks: Record<string, number> = { bulk: 5, team: 1 };
  const p = createPermits(1, (g) => ranks[g ?? ""] ?? 0);
  await p.acquire("bulk");
  const order: string[] = [];
  const waiters = ["bulk", "bulk", "team", "bulk"].map((g, i) =>
    p.acquire(g).then(() => {
      order.push(`${g}${i}`);
      p.release();
    }),
  );
  p.release();
  await Promise.all(waiters);
  expect(order).toEqual(["team2", "bulk0", "bulk1", "bulk3"]);
});
