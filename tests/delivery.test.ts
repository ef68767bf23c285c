// Cancellation, token expiry, dead letters and redrive, SSE and signed callbacks, end to end
// through real gateway and solver processes.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { eventually } from "@pipeline/devstack/testing";
import { connectNats } from "@pipeline/shared/nats";
import type { TaskView } from "@pipeline/shared/schemas";
import { streams } from "@pipeline/shared/subjects";
import { verifyWebhook, WEBHOOK_HEADERS } from "@pipeline/shared/webhooks";
import { api, clientSecret, type Stack, startStack } from "./harness.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({
    region: "dl",
    emulator: { latencyMs: 300 },
    solverEnv: { TOKEN_TTL_MS: "4000", MAX_ATTEMPTS: "2", RETRY_BASE_MS: "50", RETRY_MAX_MS: "100" },
  });
});
afterAll(() => s.stop());

let n = 0;
const turnstile = () => ({
  type: "turnstile",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/delivery/${++n}` },
});
const submit = async (body: Record<string, unknown> = turnstile()) => {
  const r = await api<{ id: string }>(s, "/v1/tasks", { method: "POST", body });
  expect(r.status).toBe(202);
  return r.body.id;
};

test("a completed token is handed out until expiresAt, then the task reads expired with no token", async () => {
  const id = await submit();
  const done = await api<TaskView>(s, `/v1/tasks/${id}?wait=20`);
  expect(done.body.status).toBe("completed");
  const expiresAt = Date.parse(done.body.result!.expiresAt!);
  expect(expiresAt - Date.parse(done.body.completedAt!)).toBeGreaterThanOrEqual(3900);
  await Bun.sleep(Math.max(0, expiresAt - Date.now()) + 100);
  const later = await api<TaskView>(s, `/v1/tasks/${id}`);
  expect(later.body.status).toBe("expired");
  expect(later.body.result).toBeUndefined();
  expect(JSON.stringify(later.body)).not.toContain(done.body.result!.token);
}, 30_000);

test("DELETE cancels an unfinished task, and a cancelled task is never submitted afterwards", async () => {
  s.emu.configure({ faults: { outageUntil: Date.now() + 60_000 } });
  try {
    const id = await submit();
    const cancelled = await api<TaskView>(s, `/v1/tasks/${id}`, { method: "DELETE" });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.status).toBe("cancelled");
    // A submit the solver decided on just before the cancel may still be on its way: the outage
    // stays on a moment longer so that it meets the 503 (seen once in CI: it landed after the
    // faults were cleared). What follows is the claim under test: no submission after the cancel.
    await Bun.sleep(1000);
    const before = s.emu.stats().submissions;
    s.emu.configure({ faults: {} });
    await Bun.sleep(1500);
    expect(s.emu.stats().submissions).toBe(before);
    expect((await api<TaskView>(s, `/v1/tasks/${id}`)).body.status).toBe("cancelled");
    const again = await api(s, `/v1/tasks/${id}`, { method: "DELETE" });
    expect(again.status).toBe(200);
  } finally {
    s.emu.configure({ faults: {} });
  }
  const done = await submit();
  expect((await api<TaskView>(s, `/v1/tasks/${done}?wait=20`)).body.status).toBe("completed");
  const conflict = await api<{ status: number }>(s, `/v1/tasks/${done}`, { method: "DELETE" });
  expect(conflict.status).toBe(409);
}, 30_000);

test("a task past its max attempts is failed with its last error, dead-lettered, and redriven by POST /retry", async () => {
  s.emu.configure({ faults: { forceCode: { inPhp: "ERROR_NO_SLOT_AVAILABLE" } } });
  let id: string;
  try {
    id = await submit();
    const failed = await api<TaskView>(s, `/v1/tasks/${id}?wait=30`);
    expect(failed.body.status).toBe("failed");
    expect(failed.body.error!.code).toBe("ERROR_NO_SLOT_AVAILABLE");
  } finally {
    s.emu.configure({ faults: {} });
  }
  const nc = await connectNats(s.nats.url, "dlq-check", s.nats.auth("admin"));
  const jsm = await jetstreamManager(nc);
  const dead = await jsm.streams.getMessage(streams.dlq("dl"), { last_by_subj: "dlq.dl.turnstile" });
  expect(dead!.json<{ taskId: string; reason: string }>()).toMatchObject({ taskId: id!, reason: "max attempts" });
  await nc.close();
  const redrive = await api<{ status: string }>(s, `/v1/tasks/${id!}/retry`, { method: "POST" });
  expect(redrive.status).toBe(202);
  expect((await api<TaskView>(s, `/v1/tasks/${id!}?wait=20`)).body.status).toBe("completed");
  const notFailed = await api(s, `/v1/tasks/${id!}/retry`, { method: "POST" });
  expect(notFailed.status).toBe(409);
}, 60_000);

test("GET /v1/tasks/:id/events streams every state change and ends at the final one", async () => {
  const id = await submit();
  const res = await fetch(`${s.gatewayUrl}/v1/tasks/${id}/events`, {
    headers: { authorization: `Bearer ${s.apiKey}` },
  });
  expect(res.headers.get("content-type")).toContain("text/event-stream");
  const text = await res.text();
  const states = [...text.matchAll(/^data: (.*)$/gm)].map((m) => (JSON.parse(m[1]!) as TaskView).status);
  expect(states[states.length - 1]).toBe("completed");
  expect(states).toContain("solving");
  expect(states.length).toBeGreaterThanOrEqual(2);
}, 30_000);

test("a callbackUrl gets one signed POST per final state, retried until the receiver acknowledges", async () => {
  const received: Array<{ delivery: string; ok: boolean; body: { event: string; task: TaskView } }> = [];
  let refuse = 2;
  const secret = await clientSecret(s);
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const body = await req.text();
      const ok = verifyWebhook(
        secret,
        {
          timestamp: req.headers.get(WEBHOOK_HEADERS.timestamp),
          signature: req.headers.get(WEBHOOK_HEADERS.signature),
        },
        body,
      );
      received.push({ delivery: req.headers.get(WEBHOOK_HEADERS.delivery)!, ok, body: JSON.parse(body) });
      if (refuse-- > 0) return new Response("busy", { status: 503 });
      return new Response("ok");
    },
  });
  try {
    const id = await submit({ ...turnstile(), callbackUrl: `http://127.0.0.1:${receiver.port}/hook` });
    await eventually(() => received.length >= 3, 20_000);
    await Bun.sleep(1500); // nothing more may arrive once acknowledged
    expect(received.length).toBe(3);
    expect(received.every((r) => r.ok)).toBe(true);
    expect(new Set(received.map((r) => r.delivery)).size).toBe(1);
    expect(received[2]!.body.event).toBe("task.completed");
    expect(received[2]!.body.task.id).toBe(id);
    expect(received[2]!.body.task.result!.token.length).toBeGreaterThan(5);
  } finally {
    receiver.stop(true);
  }
}, 40_000);
