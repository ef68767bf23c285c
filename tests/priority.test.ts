// Priority lanes: a high task behind 5,000 queued normal tasks starts within seconds, and the
// low lane is not starved by the normal one.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { eventually } from "@pipeline/devstack/testing";
import type { TaskView } from "@pipeline/shared/schemas";
import { api, type Stack, startStack } from "./harness.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({ region: "prio", solvers: 0, emulator: { latencyMs: 300 } });
});
afterAll(() => s.stop());

async function submitMany(n: number, priority: string, tag: string) {
  let next = 0;
  const ids: string[] = [];
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < n) {
        const i = next++;
        const r = await api<{ id: string }>(s, "/v1/tasks", {
          method: "POST",
          body: {
            type: "turnstile",
            priority,
            params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/${tag}/${i}` },
          },
        });
        expect(r.status).toBe(202);
        ids.push(r.body.id);
      }
    }),
  );
  return ids;
}

test("a high task submitted behind 5,000 queued normal tasks starts within seconds; low is not starved", async () => {
  await submitMany(5000, "normal", "normal");
  const low = await submitMany(50, "low", "low");
  s.spawnSolver({ SOLVER_CONCURRENCY: "100", FIRST_POLL_MS: "300", POLL_INTERVAL_MS: "100" });
  await eventually(async () => {
    const [r] = await s.db.sql<{ n: number }[]>`select count(*)::int as n from tasks where state = 'completed'`;
    return r!.n >= 100;
  }, 30_000);
  const t0 = Date.now();
  const [high] = await submitMany(1, "high", "high");
  const started = await eventually(async () => {
    const [r] = await s.db.sql<{ started_at: string | null }[]>`select started_at from tasks where id = ${high!}`;
    return r!.started_at ?? undefined;
  }, 30_000);
  const startMs = new Date(started).getTime() - t0;
  const done = await api<TaskView>(s, `/v1/tasks/${high!}?wait=30`);
  expect(done.body.status).toBe("completed");
  await eventually(async () => {
    const [r] = await s.db.sql<
      { n: number }[]
    >`select count(*)::int as n from tasks where priority = 'low' and state = 'completed'`;
    return r!.n === low.length;
  }, 60_000);
  const [normal] = await s.db.sql<
    { n: number }[]
  >`select count(*)::int as n from tasks where priority = 'normal' and state = 'completed'`;
  console.log(
    `[priority] high task started ${startMs} ms after submission behind ${5000 - normal!.n} queued normal tasks; all 50 low tasks completed while ${5000 - normal!.n} normal tasks still waited`,
  );
  expect(startMs).toBeLessThan(3000);
  expect(normal!.n).toBeLessThan(5000);
}, 240_000);
