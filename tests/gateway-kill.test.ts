// kill -9 of the gateway while clients submit with Idempotency-Key and retry on connection
// errors: every key maps to exactly one task, none is lost.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { TaskView } from "@pipeline/shared/schemas";
import { api, type Stack, startStack } from "./harness.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({ region: "gwkill", emulator: { latencyMs: 50 } });
});
afterAll(() => s.stop());

/** A client as a user writes one: retries on connection errors and 5xx, same key every time. */
async function submitWithRetry(key: string, body: unknown): Promise<{ id: string; tries: number }> {
  for (let tries = 1; ; tries++) {
    try {
      const r = await api<{ id: string }>(s, "/v1/tasks", {
        method: "POST",
        body,
        headers: { "idempotency-key": key },
      });
      if (r.status === 202) return { id: r.body.id, tries };
      if (r.status < 500) throw new Error(`unexpected ${r.status}`);
    } catch (err) {
      if ((err as Error).message.startsWith("unexpected")) throw err;
    }
    await Bun.sleep(50 + Math.random() * 100);
    if (tries > 400) throw new Error(`gave up on ${key}`);
  }
}

test("every Idempotency-Key maps to exactly one task through gateway kill -9s", async () => {
  const keys = Array.from({ length: 300 }, (_, i) => `order-${i}`);
  let kills = 0;
  let done = false;
  const killer = (async () => {
    while (!done) {
      await Bun.sleep(400 + Math.random() * 400);
      if (done) break;
      await s.gateway.kill("SIGKILL");
      kills++;
      await s.restartGateway();
    }
  })();
  let next = 0;
  const results: Array<{ key: string; id: string; tries: number }> = [];
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (next < keys.length) {
        // The last third waits for the third kill: on a quick machine the first 200 can all be
        // in before the killer has struck three times.
        if (next >= 200) for (const t0 = Date.now(); kills < 3 && Date.now() - t0 < 30_000; ) await Bun.sleep(50);
        if (next >= keys.length) break;
        const key = keys[next++]!;
        const r = await submitWithRetry(key, {
          type: "turnstile",
          params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/${key}` },
        });
        results.push({ key, ...r });
      }
    }),
  );
  done = true;
  await killer;
  const rows = await s.db.sql<
    { idempotency_key: string; n: number }[]
  >`select idempotency_key, count(*)::int as n from tasks group by idempotency_key`;
  expect(rows.length).toBe(300);
  expect(rows.every((r) => r.n === 1)).toBe(true);
  // A retry after the 202 was lost in a kill lands on the same task.
  for (const r of results)
    expect(r.id).toBe((await s.db.sql<{ id: string }[]>`select id from tasks where idempotency_key = ${r.key}`)[0]!.id);
  const views = await Promise.all(results.map((r) => api<TaskView>(s, `/v1/tasks/${r.id}?wait=60`)));
  expect(views.filter((v) => v.body.status !== "completed")).toEqual([]);
  const retried = results.filter((r) => r.tries > 1).length;
  console.log(
    `[gateway-kill] 300 keys, ${kills} gateway kill -9s, ${retried} submissions retried by the client; 300 tasks, all completed, each submitted to the provider ${s.emu.stats().submissions === 300 ? "once" : `${s.emu.stats().submissions} times in all`}`,
  );
  expect(kills).toBeGreaterThanOrEqual(3);
  expect(s.emu.stats().submissions).toBe(300);
}, 180_000);
