// The soak's CI variant: the same runner as `npm run soak` (bench/soak/run.ts), shrunk to about two
// minutes: 20 tasks/s, a solver kill -9 every 40 s (started again at once), the gateway restarted
// at the middle, every process sampled every 10 s, judged after a 60 s warm-up (a younger process's
// RSS still climbs). Asserts the soak's goals one by one from the runner's JSON result
// (bench/soak/growth.ts says what each one is). Two minutes leave one quiet stretch after the
// last kill: the solver started at the first kill and the recovery service are judged there; the
// full length (`npm run soak`) judges every process over many.
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { processFailures } from "../bench/soak/growth.ts";
import type { SoakResult } from "../bench/soak/soak.ts";
import { ROOT } from "./harness.ts";

/** What the runner writes to SOAK_JSON: its result and the goals that failed. */
type Result = SoakResult & { failed: string[] };

test("soak (2 minutes): no RSS, fd, consumer or connection growth; 0 lost, 0 extra paid", async () => {
  const dir = mkdtempSync(join(tmpdir(), "soak-test-"));
  const json = join(dir, "result.json");
  const t0 = Date.now();
  const p = Bun.spawn([process.execPath, join(ROOT, "bench/soak/run.ts")], {
    cwd: ROOT,
    env: {
      ...process.env,
      SOAK_MINUTES: "2",
      SOAK_KILL_EVERY_SEC: "40",
      SOAK_SAMPLE_SEC: "10",
      SOAK_WARMUP_SEC: "60",
      SOAK_DRAIN_SEC: "20",
      SOAK_JSON: json,
    },
    stdout: "pipe",
    stderr: "inherit",
  });
  const out = await new Response(p.stdout).text();
  const code = await p.exited;
  const line = out.split("\n").find((l) => l.startsWith("soak:"));
  console.log(
    out
      .split("\n")
      .filter((l) => !l.startsWith("soak:"))
      .slice(-16)
      .join("\n"),
  );
  console.log(`${line ?? "soak: no result line"} (${Math.round((Date.now() - t0) / 1000)} s in all)`);
  const r = JSON.parse(readFileSync(json, "utf8")) as Result;
  rmSync(dir, { recursive: true, force: true });
  expect(r.events.filter((e) => e.what.startsWith("kill -9")).length).toBe(2);
  expect(r.events.filter((e) => e.what.startsWith("gateway restarted")).length).toBe(1);
  expect(r.procs.filter((q) => q.judged).map((q) => q.label)).toEqual(expect.arrayContaining(["recovery", "solver-3"]));
  for (const q of r.procs.filter((x) => x.judged)) {
    // RSS under RSS_GROWTH_MAX_PCT (10 %), fds and Postgres connections within the tolerance.
    expect(q.rss && q.fds && q.pg).toBeDefined();
    expect({ label: q.label, failed: processFailures(q) }).toEqual({ label: q.label, failed: [] });
  }
  expect(r.global!.consumers.delta).toBeLessThanOrEqual(0);
  expect(r.global!.pgOrphans).toBe(0);
  expect(r.outcome.accepted).toBeGreaterThan(2000);
  expect(r.outcome.unaccepted).toBe(0);
  expect(r.outcome.lost).toBe(0);
  expect(r.outcome.providerSubmissions - r.outcome.tasks).toBeLessThanOrEqual(r.outcome.explainedExtra);
  expect(r.failed).toEqual([]);
  expect(code).toBe(0);
}, 180_000);
