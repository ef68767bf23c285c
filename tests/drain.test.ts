// SIGTERM: the solver stops fetching, lets in-flight tasks finish up to its deadline, and leaves
// the rest to redelivery; nothing is lost and nothing is submitted twice.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { eventually } from "@pipeline/devstack/testing";
import type { TaskView } from "@pipeline/shared/schemas";
import { api, type Stack, startStack } from "./harness.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({
    region: "drain",
    solvers: 1,
    emulator: { latencyMs: 4000 },
    solverEnv: {
      DRAIN_TIMEOUT_MS: "1500",
      FIRST_POLL_MS: "500",
      POLL_INTERVAL_MS: "500",
      ACK_WAIT_MS: "5000",
      LEASE_MS: "5000",
    },
  });
});
afterAll(() => s.stop());

test("SIGTERM past the drain deadline hands in-flight tasks over without a second submission", async () => {
  const ids: string[] = [];
  for (let i = 0; i < 40; i++) {
    const r = await api<{ id: string }>(s, "/v1/tasks", {
      method: "POST",
      body: {
        type: "turnstile",
        params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/drain/${i}` },
      },
    });
    ids.push(r.body.id);
  }
  await eventually(() => s.emu.stats().submissions >= 40, 15_000);
  const t0 = Date.now();
  const code = await s.solvers[0]!.kill("SIGTERM");
  const stopMs = Date.now() - t0;
  expect(code).toBe(0);
  expect(stopMs).toBeLessThan(5000);
  const [mid] = await s.db.sql<
    { n: number }[]
  >`select count(*)::int as n from tasks where state = 'retrying' and provider_id is not null`;
  expect(mid!.n).toBeGreaterThan(0); // released with their provider ids, for the next worker
  s.spawnSolver();
  const views = await Promise.all(ids.map((id) => api<TaskView>(s, `/v1/tasks/${id}?wait=60`)));
  expect(views.every((v) => v.body.status === "completed")).toBe(true);
  expect(s.emu.stats().submissions).toBe(40);
  expect(s.emu.stats().duplicateFingerprints).toBe(0);
  console.log(
    `[drain] SIGTERM with 40 tasks in flight: exited in ${stopMs} ms, ${mid!.n} handed over with their provider ids; all completed, 40 submissions`,
  );
}, 90_000);
