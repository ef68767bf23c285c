// The provider misbehaves: an outage opens the breaker and no task fails; several solver
// processes never exceed the plan's threads at the provider.
import { afterAll, expect, test } from "bun:test";
import type { TaskView } from "@pipeline/shared/schemas";
import { api, PROVIDER_KEY, type Stack, startStack } from "./harness.ts";

const stacks: Stack[] = [];
afterAll(async () => {
  for (const s of stacks) await s.stop();
});

const task = (tag: string, i: number) => ({
  type: "turnstile",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/${tag}/${i}` },
});
async function submitAll(s: Stack, tag: string, n: number) {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 50) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(50, n - i) }, (_, j) =>
        api<{ id: string }>(s, "/v1/tasks", { method: "POST", body: task(tag, i + j) }),
      ),
    );
    for (const r of batch) {
      expect(r.status).toBe(202);
      ids.push(r.body.id);
    }
  }
  return ids;
}
async function statesOf(s: Stack, ids: string[], wait: number) {
  const views = await Promise.all(ids.map((id) => api<TaskView>(s, `/v1/tasks/${id}?wait=${wait}`)));
  return views.reduce<Record<string, number>>((m, v) => ((m[v.body.status] = (m[v.body.status] ?? 0) + 1), m), {});
}

test("a 20 s provider outage opens the breaker; no task fails, all complete after it closes", async () => {
  const s = await startStack({
    region: "outage",
    emulator: { latencyMs: 100 },
    solverEnv: {
      BREAKER_MIN_CALLS: "5",
      BREAKER_COOLDOWN_MS: "1000",
      BREAKER_MAX_COOLDOWN_MS: "4000",
      RETRY_BASE_MS: "200",
      RETRY_MAX_MS: "2000",
    },
  });
  stacks.push(s);
  const t0 = Date.now();
  s.emu.configure({ faults: { outageUntil: t0 + 20_000 } });
  const ids = await submitAll(s, "outage", 100);
  await Bun.sleep(Math.max(0, t0 + 10_000 - Date.now()));
  const [mid] = await s.db.sql<
    { failed: number; done: number }[]
  >`select count(*) filter (where state = 'failed')::int as failed, count(*) filter (where state = 'completed')::int as done from tasks`;
  expect(mid).toEqual({ failed: 0, done: 0 });
  expect(s.logs()).toContain("provider breaker open");
  expect(await statesOf(s, ids, 60)).toEqual({ completed: 100 });
  const recovered = Date.now() - (t0 + 20_000);
  expect(s.logs()).toContain("provider breaker closed");
  console.log(
    `[outage] 100 tasks through a 20 s provider outage: 0 failed, all completed ${recovered} ms after the provider came back`,
  );
}, 120_000);

test("3 solver processes, 200 tasks, a 5-thread plan: the provider never sees more than 5 tasks in flight", async () => {
  const s = await startStack({
    region: "threads",
    solvers: 3,
    emulator: { latencyMs: 150, keys: { [PROVIDER_KEY]: { threads: 5 } } },
    solverEnv: { PROVIDER_THREADS: "5", FIRST_POLL_MS: "100", POLL_INTERVAL_MS: "50" },
  });
  stacks.push(s);
  const ids = await submitAll(s, "threads", 200);
  expect(await statesOf(s, ids, 60)).toEqual({ completed: 200 });
  const stats = s.emu.stats();
  console.log(
    `[threads] 200 tasks, 3 solvers, 5 threads: max in flight at the provider ${stats.maxInFlightByKey[PROVIDER_KEY]}, rejected submissions ${stats.rejectedSubmissions}`,
  );
  expect(stats.maxInFlightByKey[PROVIDER_KEY]).toBeLessThanOrEqual(5);
  expect(stats.maxInFlightByKey[PROVIDER_KEY]).toBeGreaterThanOrEqual(4);
  expect(stats.rejectedSubmissions).toBe(0);
  expect(stats.submissions).toBe(200);
}, 180_000);
