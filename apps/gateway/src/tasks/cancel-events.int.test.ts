// A cancelled task's final event, as the gateway publishes it: on the hook subject
// (`events.<region>.cancelled.hook`, the callback notifier's) when the task has a callback URL,
// on `events.<region>.cancelled` otherwise (issue 13: no notifier receives the final event of a
// task without a callback).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { eventSubject, hookEventSubject, streams } from "@pipeline/shared/subjects";
import { type GatewayTestStack, startGatewayTestStack } from "../testing/stack.ts";

const REGION = "gwcancel";
let s: GatewayTestStack;

beforeAll(async () => {
  s = await startGatewayTestStack(REGION);
}, 30_000);
afterAll(async () => {
  await s?.close();
});

const headers = { authorization: "Bearer client-a-key", "content-type": "application/json" };

async function submitAndCancel(callbackUrl?: string): Promise<string> {
  const res = await s.app.request("/v1/tasks", {
    method: "POST",
    headers,
    body: JSON.stringify({
      type: "turnstile",
      params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/cancel" },
      ...(callbackUrl ? { callbackUrl } : {}),
    }),
  });
  expect(res.status).toBe(202);
  const { id } = (await res.json()) as { id: string };
  const del = await s.app.request(`/v1/tasks/${id}`, { method: "DELETE", headers });
  expect(del.status).toBe(200);
  expect(((await del.json()) as { status: string }).status).toBe("cancelled");
  return id;
}

test("a task with a callback URL: its cancelled event on the hook subject; without one: on the plain subject", async () => {
  const hooked = await submitAndCancel("https://hooks.example.com/cancelled");
  const plain = await submitAndCancel();
  const onHook = await s.jsm.streams.getMessage(streams.events(REGION), {
    last_by_subj: hookEventSubject(REGION, "cancelled"),
  });
  expect(onHook!.json<{ taskId: string; kind: string; data: { callback: boolean } }>()).toMatchObject({
    taskId: hooked,
    kind: "cancelled",
    data: { callback: true },
  });
  const onPlain = await s.jsm.streams.getMessage(streams.events(REGION), {
    last_by_subj: eventSubject(REGION, "cancelled"),
  });
  expect(onPlain!.json<{ taskId: string; data: { callback: boolean } }>()).toMatchObject({
    taskId: plain,
    data: { callback: false },
  });
});
