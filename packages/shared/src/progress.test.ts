import { expect, test } from "bun:test";
import { PassThrough } from "node:stream";
import { progressBar, progressEnabled, progressFormat, quietProgress } from "./progress.ts";

const fakeStream = (isTTY: boolean) => {
  const s = new PassThrough() as unknown as NodeJS.WriteStream & { text: string };
  s.text = "";
  (s as unknown as PassThrough).on("data", (b: Buffer) => (s.text += b.toString()));
  Object.assign(s, { isTTY, columns: 100, cursorTo: () => true, clearLine: () => true, moveCursor: () => true });
  return s;
};

test("quiet unless stderr is a terminal outside CI; PROGRESS=0/1 overrides", () => {
  expect(progressEnabled(fakeStream(false), {})).toBe(false);
  expect(progressEnabled(fakeStream(true), {})).toBe(true);
  expect(progressEnabled(fakeStream(true), { CI: "1" })).toBe(false);
  expect(progressEnabled(fakeStream(true), { PROGRESS: "0" })).toBe(false);
  expect(progressEnabled(fakeStream(false), { PROGRESS: "1" })).toBe(true);
  const pipe = fakeStream(false);
  expect(progressBar("rebuild", 10, { stream: pipe, enabled: progressEnabled(pipe, {}) })).toBe(quietProgress);
});

test("a bar with an ETA when the total is known, a counter otherwise", () => {
  expect(progressFormat("restore", "events", 100)).toContain("{bar}");
  expect(progressFormat("restore", "events", 100)).toContain("ETA {eta_formatted}");
  expect(progressFormat("snapshot", "MB", undefined)).not.toContain("{bar}");
  const s = fakeStream(true);
  const p = progressBar("rebuild-queue", 4, { stream: s, enabled: true, unit: "tasks" });
  for (let i = 0; i < 4; i++) p.increment();
  p.done();
  expect(s.text).toContain("rebuild-queue");
  expect(s.text).toContain("4/4 tasks");
  const c = fakeStream(true);
  const q = progressBar("bench", undefined, { stream: c, enabled: true, unit: "tasks" });
  q.update(7);
  q.update(8, 10);
  q.done();
  expect(c.text).toContain("8/10 tasks");
});
