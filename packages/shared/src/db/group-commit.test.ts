import { expect, test } from "bun:test";
import { groupCommit } from "./group-commit.ts";

/** A writer whose statements finish only when the test says so. */
function gatedWriter(fail?: (batch: number[]) => Error | undefined) {
  const batches: number[][] = [];
  const gates: Array<() => void> = [];
  const write = async (batch: number[]) => {
    batches.push([...batch]);
    await new Promise<void>((r) => gates.push(r));
    const err = fail?.(batch);
    if (err) throw err;
    return batch.map((n) => n * 10);
  };
  return { batches, write, open: () => gates.splice(0).forEach((g) => g()) };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

test("a quiet call is written at once; calls made while statements run gather into one batch, answered in order", async () => {
  const w = gatedWriter();
  const commit = groupCommit(w.write, { maxInFlight: 1 });
  const first = commit(1);
  expect(w.batches).toEqual([[1]]);
  const rest = [2, 3, 4, 5].map(commit);
  await tick();
  expect(w.batches).toEqual([[1]]); // still waiting for the first statement
  w.open();
  expect(await first).toBe(10);
  await tick();
  expect(w.batches).toEqual([[1], [2, 3, 4, 5]]);
  w.open();
  expect(await Promise.all(rest)).toEqual([20, 30, 40, 50]);
});

test("with turn, the calls of one quiet event-loop turn share a statement (issue 13: the first no longer goes alone)", async () => {
  const w = gatedWriter();
  const commit = groupCommit(w.write, { maxInFlight: 1, turn: true });
  const all = [1, 2, 3].map(commit);
  expect(w.batches).toEqual([]); // not yet: the turn's other calls may join
  await new Promise((r) => setImmediate(r));
  expect(w.batches).toEqual([[1, 2, 3]]);
  const later = commit(4); // a statement runs: this one waits for it, no second statement
  await new Promise((r) => setImmediate(r));
  expect(w.batches).toEqual([[1, 2, 3]]);
  w.open();
  expect(await Promise.all(all)).toEqual([10, 20, 30]);
  await tick();
  expect(w.batches).toEqual([[1, 2, 3], [4]]);
  w.open();
  expect(await later).toBe(40);
});

test("batches are capped at maxBatch and at most maxInFlight statements run at once", async () => {
  const w = gatedWriter();
  const commit = groupCommit(w.write, { maxBatch: 3, maxInFlight: 2 });
  const all = Array.from({ length: 8 }, (_, i) => commit(i));
  await tick();
  expect(w.batches).toEqual([[0], [1]]); // two statements on the wire, the rest gather
  w.open();
  await tick();
  await tick();
  expect(w.batches).toEqual([[0], [1], [2, 3, 4], [5, 6, 7]]);
  w.open();
  expect(await Promise.all(all)).toEqual([0, 10, 20, 30, 40, 50, 60, 70]);
});

test("a row-level failure in a batch fails only its own caller; a batch-wide failure fails them all without retries", async () => {
  const rowErr = Object.assign(new Error("bad row 3"), { code: "23505" });
  const connErr = Object.assign(new Error("connection lost"), { code: "CONNECTION_CLOSED" });
  let connectionDown = false;
  const w = gatedWriter((batch) => (connectionDown ? connErr : batch.includes(3) ? rowErr : undefined));
  const commit = groupCommit(w.write, {
    maxInFlight: 1,
    batchWide: (e) => (e as { code?: string }).code === "CONNECTION_CLOSED",
  });

  const blocker = commit(0);
  const mixed = [2, 3, 4].map((n) =>
    commit(n).then(
      (v) => ({ v }),
      (e: Error) => ({ e: e.message }),
    ),
  );
  w.open();
  await blocker;
  for (let i = 0; i < 5; i++) {
    await tick();
    w.open();
  }
  expect(await Promise.all(mixed)).toEqual([{ v: 20 }, { e: "bad row 3" }, { v: 40 }]);
  expect(w.batches.slice(1, 2)).toEqual([[2, 3, 4]]);
  expect(w.batches.slice(2).sort()).toEqual([[2], [3], [4]]);

  connectionDown = true;
  const before = w.batches.length;
  const blocker2 = commit(0).catch(() => undefined);
  const down = [5, 6].map((n) => commit(n).catch((e: Error) => e.message));
  w.open();
  await blocker2;
  await tick();
  w.open();
  expect(await Promise.all(down)).toEqual(["connection lost", "connection lost"]);
  expect(w.batches.length - before).toBe(2); // [0] and [5, 6]: no one-by-one retries
});

test("a writer that answers the wrong number of results fails the batch instead of mismatching callers", async () => {
  const commit = groupCommit(async (batch: number[]) => batch.slice(1), { maxInFlight: 1 });
  const a = commit(1).catch((e: Error) => e.message);
  expect(await a).toContain("0 results for 1 requests");
});

test("with a key, two requests for the same row never share a batch and apply in call order", async () => {
  const w = gatedWriter();
  const commit = groupCommit(w.write, { maxInFlight: 1, key: (n) => String(n % 10) });
  const all = [1, 2, 11, 3, 21, 12].map(commit);
  await tick();
  w.open();
  for (let i = 0; i < 4; i++) {
    await tick();
    w.open();
  }
  expect(await Promise.all(all)).toEqual([10, 20, 110, 30, 210, 120]);
  expect(w.batches).toEqual([[1], [2, 11, 3], [21, 12]]);
});
