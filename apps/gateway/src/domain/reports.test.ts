import { expect, test } from "bun:test";
import { decideReport, type ReportedTask, sitekeyOf } from "./reports.ts";

const now = new Date("2030-01-01T12:00:00Z");
const row = (over: Partial<ReportedTask> = {}): ReportedTask => ({
  id: "0190a000-0000-7000-8000-000000000001",
  owner: "client-a",
  type: "recaptcha_v2",
  region: "fsn1",
  params: { sitekey: "6Le-site", pageurl: "https://x.example" },
  state: "completed",
  providerId: "7100",
  providerKeyRef: "key_abc",
  completedAt: new Date(now.getTime() - 60_000),
  ...over,
});
const WINDOW = 15 * 60_000;

test("a solved task of the caller within the window is reported to its provider task, with its site key", () => {
  expect(decideReport(row(), "client-a", false, now, WINDOW)).toEqual({
    ok: true,
    report: {
      taskId: "0190a000-0000-7000-8000-000000000001",
      owner: "client-a",
      accepted: false,
      taskType: "recaptcha_v2",
      sitekey: "6Le-site",
      region: "fsn1",
      providerTaskId: "7100",
      providerKeyRef: "key_abc",
    },
  });
});

test("another client's task reads as not found, as every read answers it", () => {
  expect(decideReport(row(), "client-b", true, now, WINDOW)).toEqual({ ok: false, refusal: "not_found" });
  expect(decideReport(undefined, "client-a", true, now, WINDOW)).toEqual({ ok: false, refusal: "not_found" });
});

test("a task no provider solved (unfinished, failed, no provider task) cannot be reported", () => {
  for (const over of [{ state: "solving" as const }, { state: "failed" as const }, { providerId: null }])
    expect(decideReport(row(over), "client-a", true, now, WINDOW)).toEqual({ ok: false, refusal: "not_solved" });
});

test("a report later than the window after completion is refused", () => {
  const old = row({ completedAt: new Date(now.getTime() - WINDOW - 1) });
  expect(decideReport(old, "client-a", false, now, WINDOW)).toEqual({ ok: false, refusal: "window_closed" });
  const edge = row({ completedAt: new Date(now.getTime() - WINDOW) });
  expect(decideReport(edge, "client-a", false, now, WINDOW).ok).toBe(true);
});

test("the site key is the task's sitekey, googlekey or gt; none for images", () => {
  expect(sitekeyOf({ gt: "81388ea1" })).toBe("81388ea1");
  expect(sitekeyOf({ body: "..." })).toBeNull();
  expect(sitekeyOf(null)).toBeNull();
});
