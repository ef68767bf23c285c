import { describe, expect, test } from "bun:test";
import { shardOf } from "@pipeline/shared/subjects";
import { ProcessWindow, percentile, taskFigures, troubled, type WindowRow } from "./figures.ts";

const row = (id: string, o: Partial<WindowRow> = {}): WindowRow => ({
  id,
  state: "completed",
  attempts: 1,
  errorCode: null,
  providerSubmissions: 1,
  createdAtMs: 1000,
  completedAtMs: 2000,
  ...o,
});
const ids = Array.from({ length: 200 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`);

describe("task figures split the same window by shard owner", () => {
  const owners = Array.from({ length: 16 }, (_, s) => (s < 4 ? "v2" : "v1"));
  test("every row counts once, for the version that owns its shard", () => {
    const f = taskFigures(
      ids.map((id) => row(id)),
      owners,
      5000,
    );
    const v2 = ids.filter((id) => shardOf(id) < 4).length;
    expect(f.get("v2")!.tasks).toBe(v2);
    expect(f.get("v1")!.tasks).toBe(ids.length - v2);
  });
  test("failed, retrying or retried tasks are troubles; extra submissions beyond one are counted", () => {
    expect(
      [
        row("a", { state: "failed" }),
        row("a", { state: "retrying" }),
        row("a", { attempts: 2 }),
        row("a", { errorCode: "TRANSPORT" }),
        row("a"),
      ].map(troubled),
    ).toEqual([true, true, true, true, false]);
    const f = taskFigures(
      [
        row(ids[0]!, { providerSubmissions: 3 }),
        row(ids[0]!, { providerSubmissions: 0, state: "queued", completedAtMs: null }),
      ],
      ["v1"],
      11_000,
    ).get("v1")!;
    expect(f.extraPaid).toBe(2);
    // The unfinished task counts with its age (10 s), not as fast.
    expect(f.p95Ms).toBe(10_000);
  });
  test("percentile by nearest rank", () => {
    expect(percentile([], 95)).toBeNull();
    expect(
      percentile(
        Array.from({ length: 100 }, (_, i) => i + 1),
        95,
      ),
    ).toBe(95);
  });
});

describe("the process window folds heartbeats into per-version counts", () => {
  const beat = (workerId: string, version: string, startedAt: string, calls: number, errors = 0) => ({
    workerId,
    version,
    startedAt,
    tally: { providerCalls: calls, providerErrors: errors },
  });
  const early = new Date(0).toISOString();
  test("counts only what happened after the window began", () => {
    const w = new ProcessWindow(10_000);
    w.observe([beat("a", "v1", early, 100, 5), beat("b", "v2", early, 40)], new Set());
    w.observe([beat("a", "v1", early, 130, 6), beat("b", "v2", early, 50, 10)], new Set());
    expect(w.figures("v1")).toEqual({ providerCalls: 30, providerErrors: 1, lostProcesses: 0 });
    expect(w.figures("v2")).toEqual({ providerCalls: 10, providerErrors: 10, lostProcesses: 0 });
    expect(w.processes()).toEqual({ v1: 1, v2: 1 });
  });
  test("a process that started inside the window counts from zero", () => {
    const w = new ProcessWindow(10_000);
    w.observe([beat("c", "v2", new Date(20_000).toISOString(), 7, 7)], new Set());
    expect(w.figures("v2")).toMatchObject({ providerCalls: 7, providerErrors: 7 });
  });
  test("a restart and a vanished heartbeat are lost processes; a clean stop (deleted) is not", () => {
    const w = new ProcessWindow(10_000);
    w.observe([beat("a", "v2", early, 10), beat("b", "v2", early, 10), beat("c", "v2", early, 10)], new Set());
    w.observe([beat("a", "v2", early, 15), beat("b", "v2", early, 12), beat("c", "v2", early, 11)], new Set());
    w.observe([beat("a", "v2", new Date(30_000).toISOString(), 2)], new Set(["c"]));
    // a restarted (its 5 calls kept, 2 new), b vanished, c stopped cleanly.
    expect(w.figures("v2")).toEqual({ providerCalls: 5 + 2 + 2 + 1, providerErrors: 0, lostProcesses: 2 });
    expect(w.processes()).toEqual({ v2: 1 });
  });
});

test("extra submissions cost their type's list price; the clients' reports count per version", () => {
  const f = taskFigures(
    [
      row(ids[0]!, { providerSubmissions: 3, type: "turnstile", accepted: false }),
      row(ids[1]!, { providerSubmissions: 2, type: "recaptcha_v2", accepted: true }),
      row(ids[2]!, { providerSubmissions: 1, type: "image", accepted: null }),
    ],
    ["v1"],
    Date.now(),
  );
  expect(f.get("v1")).toMatchObject({ extraPaid: 3, extraPaidMicros: 2 * 1450 + 2990, reports: 2, rejected: 1 });
});
