// One solver handed two copies of one task at once (a re-publish by a sweep or a reaper while
// the original message is still in TASKS): a solver may re-claim its own lease, so only its
// in-process guard stands between the two copies and a second paid submission.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstream } from "@nats-io/jetstream";
import { eventually } from "@pipeline/devstack/testing";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import type { TaskView } from "@pipeline/shared/schemas";
import { shardOf, taskSubject } from "@pipeline/shared/subjects";
import { api, type Stack, startStack } from "./harness.ts";

const region = "dupdeliv";
let s: Stack;
let nc: NatsConnection;
beforeAll(async () => {
  // No solver yet: both copies wait in TASKS, then one solver pulls them in one batch.
  s = await startStack({ region, solvers: 0, emulator: { latencyMs: 1500 } });
  nc = await connectNats(s.nats.url, "double-delivery", s.nats.auth("admin"));
}, 60_000);
afterAll(async () => {
  await nc?.close();
  await s?.stop();
});

test("two copies of 20 tasks delivered to one solver together: one provider submission each", async () => {
  const js = jetstream(nc);
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    const body = {
      type: "turnstile",
      params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/dup/${i}` },
    };
    const r = await api<{ id: string }>(s, "/v1/tasks", { method: "POST", body });
    expect(r.status).toBe(202);
    ids.push(r.body.id);
    // The second copy, under another message id (what a re-publish is).
    await js.publish(
      taskSubject(region, "normal", shardOf(r.body.id)),
      JSON.stringify({ id: r.body.id, type: "turnstile", priority: "normal" }),
      { msgID: `${r.body.id}:copy` },
    );
  }
  s.spawnSolver();
  const views = await Promise.all(ids.map((id) => api<TaskView>(s, `/v1/tasks/${id}?wait=60`)));
  expect(views.map((v) => v.body.status)).toEqual(ids.map(() => "completed"));
  // Both copies were taken (none is left for later), and the provider saw each task once.
  await eventually(
    async () => {
      const [c] = await s.db.sql<
        { n: number }[]
      >`select count(*)::int as n from tasks where id = any(${ids}::uuid[]) and provider_submissions = 1`;
      return c!.n === ids.length;
    },
    10_000,
    100,
  );
  expect(s.emu.stats().submissions).toBe(ids.length);
  expect(s.emu.stats().duplicateFingerprints).toBe(0);
}, 120_000);
