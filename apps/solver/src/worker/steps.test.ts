import { expect, test } from "bun:test";
import type { TaskRow } from "@pipeline/shared/db";
import type { Breaker } from "../domain/breaker.ts";
import type { HandlerDeps } from "./deps.ts";
import { publishWritten, type TaskInHand, writeStep } from "./steps.ts";

const TASK = "00000000-0000-4000-8000-000000000001";

/** Deps whose store answers `row` to every write and whose sink records what is published. */
function fakeDeps(row: Partial<TaskRow> | undefined) {
  const published: unknown[] = [];
  const writes: Array<[string, unknown]> = [];
  const deps = {
    workerId: "w-1",
    store: {
      release: async (_id: string, _w: string, r: unknown) => (writes.push(["release", r]), row),
      fail: async (_id: string, _w: string, r: unknown) => (writes.push(["fail", r]), row),
    },
    events: {
      publish: async (ev: unknown) => void published.push(ev),
      alert: async () => {},
      deadLetter: async () => {},
    },
    timing: { get: () => ({ maxAttempts: 5 }) },
    log: { error: () => {} },
    counters: {},
  } as unknown as HandlerDeps;
  return { deps, published, writes };
}

const task: TaskInHand = {
  taskId: TASK,
  type: "recaptcha_v2",
  row: { attempts: 1, deadlineAt: null, errorCode: null },
  polls: 2,
  providerId: null,
};
const breaker = { retryInMs: () => 1000 } as unknown as Breaker;

test("a retry releases the row and publishes retrying with its code and delay", async () => {
  const { deps, published, writes } = fakeDeps({ version: 4, callbackUrl: null });
  const solved = await writeStep(deps, task, { kind: "retry", code: "ERR_X", delayMs: 700, why: "x" }, breaker);
  expect(writes).toEqual([["release", { polls: 2, code: "ERR_X" }]]);
  expect(published).toEqual([
    {
      taskId: TASK,
      kind: "retrying",
      state: "retrying",
      version: 4,
      data: { code: "ERR_X", delayMs: 700, worker: "w-1" },
    },
  ]);
  expect(solved.outcome.kind).toBe("nak");
});

test("a fail writes the row and publishes failed saying whether a callback waits", async () => {
  const { deps, published } = fakeDeps({ version: 7, callbackUrl: "https://example.test/hook" });
  await writeStep(deps, task, { kind: "fail", code: "ERROR_CAPTCHA_UNSOLVABLE" }, breaker);
  expect(published).toEqual([
    {
      taskId: TASK,
      kind: "failed",
      state: "failed",
      version: 7,
      data: { code: "ERROR_CAPTCHA_UNSOLVABLE", callback: true, worker: "w-1" },
    },
  ]);
});

test("a stopped key releases the row and publishes retrying with its code", async () => {
  const { deps, published } = fakeDeps({ version: 2, callbackUrl: null });
  await writeStep(deps, task, { kind: "keyStopped", code: "ERROR_ZERO_BALANCE" }, breaker);
  expect(published).toEqual([
    {
      taskId: TASK,
      kind: "retrying",
      state: "retrying",
      version: 2,
      data: { code: "ERROR_ZERO_BALANCE", worker: "w-1" },
    },
  ]);
});

test("a write that changed no row (the lease is lost) publishes nothing", async () => {
  for (const step of [
    { kind: "retry", delayMs: 100, why: "x" },
    { kind: "fail", code: "E" },
    { kind: "keyStopped", code: "E" },
  ] as const) {
    const { deps, published } = fakeDeps(undefined);
    await writeStep(deps, task, step, breaker);
    expect(published).toEqual([]);
  }
});

test("publishWritten: the row's version, the kind as the state, data read from the written row", async () => {
  const { deps, published } = fakeDeps(undefined);
  const row = { version: 9, callbackUrl: null } as TaskRow;
  await publishWritten(deps.events, TASK, row, "failed", (r) => ({ callback: r.callbackUrl !== null }));
  await publishWritten(deps.events, TASK, undefined, "retrying", () => ({}));
  expect(published).toEqual([{ taskId: TASK, kind: "failed", state: "failed", version: 9, data: { callback: false } }]);
});
