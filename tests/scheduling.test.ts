// notBefore / needBy end to end (docs/scheduling.md): the gateway holds the task on TASKS with a
// message schedule, the solver starts it at its time; needBy is met, or the task fails with
// NEED_BY_PASSED; a scheduled task can be cancelled; a bad schedule is a 400 and stores nothing.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { eventually } from "@pipeline/devstack/testing";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import type { TaskView } from "@pipeline/shared/schemas";
import { scheduleSubject, streams } from "@pipeline/shared/subjects";
import { api, type Stack, startStack } from "./harness.ts";

let s: Stack;
beforeAll(async () => {
  s = await startStack({
    region: "sched",
    // turnstile solves in ~1 s; recaptcha v2 in 6 s (longer than the impossible needBy below).
    emulator: { latencyMs: { turnstile: 1000, userrecaptcha: 6000 } },
    // Nothing measured yet: the default lead (2 s) + margin (1 s) = needBy - 3 s.
    gatewayEnv: { SCHEDULE_DEFAULT_SOLVE_MS: "2000", SCHEDULE_MARGIN_MS: "1000" },
    solverEnv: { FIRST_POLL_MS: "300", POLL_INTERVAL_MS: "200" },
  });
});
afterAll(async () => {
  await nc?.close();
  await s?.stop();
});

let nc: NatsConnection | undefined;
/** TASKS as the operator sees it (the admin user). */
async function tasksInfo(subject?: string) {
  nc ??= await connectNats(s.nats.url, "sched-test", s.nats.auth("admin"));
  const jsm = await jetstreamManager(nc);
  return jsm.streams.info(streams.tasks("sched"), subject ? { subjects_filter: subject } : undefined);
}
/** Messages TASKS holds on `subject`. */
async function heldOn(subject: string): Promise<number> {
  return (await tasksInfo(subject)).state.subjects?.[subject] ?? 0;
}

const params = (tag: string) => ({ sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/${tag}` });
const iso = (ms: number) => new Date(ms).toISOString();

interface Times {
  state: string;
  /** Epoch ms (NaN when null). */
  started: number;
  completed: number;
  startAt: number;
  error_code: string | null;
}
async function row(id: string): Promise<Times> {
  const [r] = await s.db.sql<{ state: string; s: number; c: number; a: number; error_code: string | null }[]>`
    select state, error_code,
      (extract(epoch from started_at) * 1000)::float8 as s,
      (extract(epoch from completed_at) * 1000)::float8 as c,
      (extract(epoch from start_at) * 1000)::float8 as a
    from tasks where id = ${id}`;
  const n = (v: number | null) => (v === null ? Number.NaN : v);
  return { state: r!.state, error_code: r!.error_code, started: n(r!.s), completed: n(r!.c), startAt: n(r!.a) };
}

async function submit(body: Record<string, unknown>) {
  return api<{ id: string; status: string; errors?: { field: string; message: string }[] }>(s, "/v1/tasks", {
    method: "POST",
    body,
  });
}

test("a bad schedule is a 400 naming the field, and nothing is stored", async () => {
  const [before] = await s.db.sql<{ n: number }[]>`select count(*)::int as n from tasks`;
  const now = Date.now();
  const past = await submit({ type: "turnstile", params: params("past"), notBefore: iso(now - 60_000) });
  expect(past.status).toBe(400);
  expect(past.body.errors).toContainEqual({ field: "notBefore", message: "must be in the future" });
  const order = await submit({
    type: "turnstile",
    params: params("order"),
    notBefore: iso(now + 120_000),
    needBy: iso(now + 60_000),
  });
  expect(order.status).toBe(400);
  expect(order.body.errors).toContainEqual({ field: "needBy", message: "must be after notBefore" });
  const far = await submit({ type: "turnstile", params: params("far"), needBy: iso(now + 25 * 3600_000) });
  expect(far.status).toBe(400);
  expect(far.body.errors?.[0]?.field).toBe("needBy");
  const text = await submit({ type: "turnstile", params: params("text"), needBy: "tomorrow at nine" });
  expect(text.status).toBe(400);
  expect(text.body.errors?.[0]?.field).toBe("needBy");
  const [after] = await s.db.sql<{ n: number }[]>`select count(*)::int as n from tasks`;
  expect(after!.n).toBe(before!.n);
});

test("notBefore: the task is queued from acceptance and does not start before it", async () => {
  const notBefore = Date.now() + 4000;
  const r = await submit({ type: "turnstile", params: params("nb"), notBefore: iso(notBefore) });
  expect(r.status).toBe(202);
  expect(r.body.status).toBe("queued");
  const seen = await api<TaskView>(s, `/v1/tasks/${r.body.id}`);
  expect(seen.body.status).toBe("queued");
  expect(seen.body.notBefore).toBe(new Date(notBefore).toISOString());
  expect(seen.body.startAt).toBe(new Date(notBefore).toISOString());
  expect(seen.body.needBy).toBeUndefined();
  const done = await api<TaskView>(s, `/v1/tasks/${r.body.id}?wait=20`);
  expect(done.body.status).toBe("completed");
  const t = await row(r.body.id);
  expect(t.startAt).toBe(notBefore);
  expect(t.started).toBeGreaterThanOrEqual(notBefore);
});

test("needBy: started at needBy minus the lead, the token ready before needBy", async () => {
  const needBy = Date.now() + 8000;
  const r = await submit({ type: "turnstile", params: params("need"), needBy: iso(needBy) });
  expect(r.status).toBe(202);
  const done = await api<TaskView>(s, `/v1/tasks/${r.body.id}?wait=20`);
  expect(done.body.status).toBe("completed");
  const t = await row(r.body.id);
  expect(t.startAt).toBe(needBy - 3000);
  expect(t.started).toBeGreaterThanOrEqual(needBy - 3000);
  expect(t.completed).toBeLessThan(needBy);
  // Fresh: the token was made within the lead before needBy, not at acceptance 8 s earlier.
  expect(needBy - t.completed).toBeLessThan(3000);
});

test("an impossible needBy fails with NEED_BY_PASSED", async () => {
  const needBy = Date.now() + 2000;
  const r = await submit({ type: "recaptcha_v2", params: params("late"), needBy: iso(needBy) });
  expect(r.status).toBe(202);
  const done = await api<TaskView>(s, `/v1/tasks/${r.body.id}?wait=20`);
  expect(done.body.status).toBe("failed");
  expect(done.body.error?.code).toBe("NEED_BY_PASSED");
  const t = await row(r.body.id);
  expect(t.error_code).toBe("NEED_BY_PASSED");
  expect(t.completed).toBeGreaterThanOrEqual(needBy);
});

test("a scheduled task can be cancelled before it starts, and never starts", async () => {
  const notBefore = Date.now() + 5000;
  const r = await submit({ type: "turnstile", params: params("cancel"), notBefore: iso(notBefore) });
  expect(r.status).toBe(202);
  const subject = scheduleSubject("sched", r.body.id);
  expect(await heldOn(subject)).toBe(1);
  const del = await api<TaskView>(s, `/v1/tasks/${r.body.id}`, { method: "DELETE" });
  expect(del.status).toBe(200);
  expect(del.body.status).toBe("cancelled");
  // The held message is gone with the cancel, not left on TASKS until its time; the lane copy the
  // removal publishes is acked by the solver (row final): TASKS is empty well before notBefore.
  expect(await heldOn(subject)).toBe(0);
  await eventually(async () => (await tasksInfo()).state.messages === 0, 2500);
  expect(Date.now()).toBeLessThan(notBefore);
  await Bun.sleep(notBefore + 2000 - Date.now());
  const t = await row(r.body.id);
  expect(t.state).toBe("cancelled");
  expect(t.started).toBeNaN();
});

test("a replayed scheduled submit (same Idempotency-Key) answers the same task, still held until its start", async () => {
  const notBefore = Date.now() + 3000;
  const body = { type: "turnstile", params: params("replay"), notBefore: iso(notBefore) };
  const headers = { "idempotency-key": "sched-replay-1" };
  const first = await api<{ id: string }>(s, "/v1/tasks", { method: "POST", body, headers });
  const again = await api<{ id: string }>(s, "/v1/tasks", { method: "POST", body, headers });
  expect(first.status).toBe(202);
  expect(again.status).toBe(202);
  expect(again.body.id).toBe(first.body.id);
  const done = await api<TaskView>(s, `/v1/tasks/${first.body.id}?wait=20`);
  expect(done.body.status).toBe("completed");
  const t = await row(first.body.id);
  expect(t.started).toBeGreaterThanOrEqual(notBefore);
  const [n] = await s.db.sql<{ attempts: number }[]>`select attempts from tasks where id = ${first.body.id}`;
  expect(n!.attempts).toBe(1);
});

test("a client's retry after notBefore passed (its 202 lost) answers the task it created, not a 400", async () => {
  const notBefore = Date.now() + 1500;
  const body = { type: "turnstile", params: params("late-retry"), notBefore: iso(notBefore) };
  const headers = { "idempotency-key": "sched-late-retry-1" };
  const first = await api<{ id: string }>(s, "/v1/tasks", { method: "POST", body, headers });
  expect(first.status).toBe(202);
  await Bun.sleep(notBefore + 300 - Date.now());
  const again = await api<{ id: string }>(s, "/v1/tasks", { method: "POST", body, headers });
  expect(again.status).toBe(202);
  expect(again.body.id).toBe(first.body.id);
  // A key that made no task: the passed notBefore is still a 400 naming the field.
  const fresh = await api<{ errors?: { field: string }[] }>(s, "/v1/tasks", {
    method: "POST",
    body,
    headers: { "idempotency-key": "sched-late-retry-none" },
  });
  expect(fresh.status).toBe(400);
  expect(fresh.body.errors?.[0]?.field).toBe("notBefore");
  const done = await api<TaskView>(s, `/v1/tasks/${first.body.id}?wait=20`);
  expect(done.body.status).toBe("completed");
  const [n] = await s.db.sql<
    { n: number }[]
  >`select count(*)::int as n from tasks where idempotency_key = ${headers["idempotency-key"]}`;
  expect(n!.n).toBe(1);
});
