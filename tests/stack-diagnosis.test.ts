// The drills' failure diagnosis (tests/support/stack-diagnosis.ts): a stalled event loop is seen,
// and the last error lines of app and nats-server logs are picked, oldest first.
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lastErrors, logsIn, watchEventLoop, withDiagnosis } from "./support/stack-diagnosis.ts";

test("a busy event loop shows as a stall; an idle one does not", async () => {
  const w = watchEventLoop({ everyMs: 20, stallMs: 300 });
  await Bun.sleep(100);
  expect(w.summary()).toContain("0 stalls >= 300 ms");
  const until = performance.now() + 500;
  while (performance.now() < until); // the loop is blocked for half a second
  await Bun.sleep(60);
  w.stop();
  const s = w.summary();
  expect(s).toMatch(/1 stalls >= 300 ms \((\d+) ms at \+\d+\.\d s\)/);
  expect(Number(/max (\d+) ms/.exec(s)![1])).toBeGreaterThanOrEqual(400);
  w.reset();
  expect(w.summary()).toContain("max 0 ms; 0 stalls");
});

test("the last error lines of app (pino) and nats-server logs, oldest first; info and warnings left out", () => {
  const dir = mkdtempSync(join(tmpdir(), "diag-"));
  try {
    const line = (level: number, time: string, msg: string, err?: string) =>
      JSON.stringify({ level, time, service: "recovery", msg, err });
    writeFileSync(
      join(dir, "recovery-fsn1.log"),
      [
        line(30, "2026-12-05T13:37:01.000Z", "info"),
        line(50, "2026-12-05T13:37:27.864Z", "lease round failed", "timeout"),
        line(40, "2026-12-05T13:37:30.000Z", "warned"),
        "not json",
      ].join("\n"),
    );
    writeFileSync(
      join(dir, "nats-hel1.log"),
      [
        "[7062] 2026/12/05 13:37:17.496990 [INF] Starting nats-server",
        "[7062] 2026/12/05 13:37:28.100000 [ERR] 10.0.0.1:7422 - lid:6 - Leafnode Error 'stale connection'",
        "[7062] 2026/12/05 13:37:29.000000 [WRN] slow",
      ].join("\n"),
    );
    const logs = logsIn(dir);
    expect(logs.map((l) => l.name).sort()).toEqual(["nats-hel1", "recovery-fsn1"]);
    expect(lastErrors(logs)).toEqual([
      "13:37:27.864 recovery-fsn1: lease round failed (timeout)",
      "13:37:28.100 nats-hel1: 10.0.0.1:7422 - lid:6 - Leafnode Error 'stale connection'",
    ]);
    expect(lastErrors(logs, 1)).toEqual([
      "13:37:28.100 nats-hel1: 10.0.0.1:7422 - lid:6 - Leafnode Error 'stale connection'",
    ]);
    expect(lastErrors([{ file: join(dir, "missing.log"), name: "x" }])).toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a failed body's message gains the diagnosis; a passing body's value comes back", async () => {
  expect(
    await withDiagnosis(
      () => "never read",
      async () => 7,
    ),
  ).toBe(7);
  const err = await withDiagnosis(
    () => "lag: max 3 ms",
    async () => {
      throw new Error("drill failed");
    },
  ).catch((e: Error) => e);
  expect((err as Error).message).toBe("drill failed\n--- diagnosis ---\nlag: max 3 ms");
});
