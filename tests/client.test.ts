// @pipeline/client against the real gateway, solver and provider emulator (one region): submit,
// wait (long-poll and SSE), cancel, report; a submit whose reply is lost pays once; 429 waits its
// Retry-After; a dead first region fails over and the client comes home after failBackMs.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createServer } from "node:net";
import {
  ApiError,
  type Client,
  type ClientOptions,
  createClient,
  parseCallbackBody,
  parseTaskView,
  type TaskRequest,
  type TaskView,
  verifyCallback,
} from "@pipeline/client";
import { unpepperedClientId } from "@pipeline/shared/client-ids";
import {
  TaskRequest as SharedTaskRequest,
  TaskView as SharedTaskView,
  type TaskView as SharedTaskViewType,
} from "@pipeline/shared/schemas";
import { api, clientSecret, type Stack, startStack } from "./harness.ts";

// The hand-written types and the gateway's own, assignable both ways (a compile-time check).
const _viewsAgree = (a: TaskView, b: SharedTaskViewType): [SharedTaskViewType, TaskView] => [a, b];
// A request as the client types it is what the gateway's schema takes as input (priority defaults).
const _requestsAgree = (a: TaskRequest): (typeof SharedTaskRequest)["_zod"]["input"] => a;
const _requestsAgreeBack = (b: (typeof SharedTaskRequest)["_zod"]["input"]): TaskRequest => b;
void _viewsAgree;
void _requestsAgreeBack;
void _requestsAgree;

const QUOTA_KEY = "client-quota-key-0002";
let s: Stack;
beforeAll(async () => {
  s = await startStack({
    // reCAPTCHA v2 takes a minute (the task to cancel); the rest are quick.
    emulator: { latencyMs: { userrecaptcha: 60_000, turnstile: 50, image: 50 } },
    gatewayEnv: {
      API_KEYS: `e2e-client-key-0001,${QUOTA_KEY}`,
      // One new task per two seconds for the second key: its second submit in a row is a 429 (Retry-After: 2).
      QUOTAS: JSON.stringify({ keys: { [unpepperedClientId(QUOTA_KEY)]: { submitsPerSecond: 0.5, burst: 1 } } }),
    },
  });
});
afterAll(() => s.stop());

const turnstile = (tag: string, callbackUrl?: string): TaskRequest => ({
  type: "turnstile",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://client.example/${tag}` },
  ...(callbackUrl ? { callbackUrl } : {}),
});
const client = (o: Partial<ClientOptions> = {}): Client =>
  createClient({ regions: [s.gatewayUrl], apiKey: s.apiKey, retry: { baseMs: 50 }, ...o });

/** A port nothing listens on. */
async function deadUrl(): Promise<string> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return `http://127.0.0.1:${port}`;
}

const tasksSince = async (t0: Date) =>
  Number(
    (
      await s.db.sql<
        { n: string }[]
      >`select count(*) as n from tasks where created_at >= ${t0.toISOString()}::timestamptz`
    )[0]!.n,
  );

test("submit, then wait by long-poll and by the event stream: the views match the gateway's own schema", async () => {
  const c = client();
  const a = await c.submit(turnstile("wait"));
  expect(a).toMatchObject({ status: "queued", replayed: false });
  const done = await c.wait(a.id, { timeoutMs: 30_000 });
  expect(done.status).toBe("completed");
  expect(done.result!.token.length).toBeGreaterThan(0);
  // The raw reply, parsed by the client and by the gateway's zod schema: the same object.
  const raw = await api<unknown>(s, `/v1/tasks/${a.id}`);
  expect(parseTaskView(raw.body)).toEqual(SharedTaskView.parse(raw.body));
  expect(await c.get(a.id)).toEqual(parseTaskView(raw.body));

  const b = await c.submit(turnstile("sse"));
  const seen: string[] = [];
  for await (const v of c.events(b.id)) seen.push(v.status);
  expect(seen.at(-1)).toBe("completed");
  expect((await c.waitSSE(b.id, { timeoutMs: 10_000 })).status).toBe("completed");
  expect(c.stats()).toMatchObject({ retries: 0, failovers: 0, errors: {} });
}, 60_000);

test("cancel an unfinished task; report a solved one (once: the second is a 409 with its problem)", async () => {
  const c = client();
  const slow = await c.submit({
    type: "recaptcha_v2",
    params: { sitekey: "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", pageurl: "https://client.example/cancel" },
  });
  const cancelled = await c.cancel(slow.id);
  expect(cancelled.status).toBe("cancelled");
  expect(SharedTaskView.parse((await api<unknown>(s, `/v1/tasks/${slow.id}`)).body).status).toBe("cancelled");
  // Cancelling a cancelled task answers its view again (a retried cancel is harmless).
  expect((await c.cancel(slow.id)).status).toBe("cancelled");

  const solved = await c.submit(turnstile("report"));
  expect((await c.wait(solved.id, { timeoutMs: 30_000 })).status).toBe("completed");
  expect(await c.report(solved.id, "bad")).toEqual({ id: solved.id, accepted: false, status: "pending" });
  const twice = await c.report(solved.id, "bad").catch((e) => e);
  expect(twice).toBeInstanceOf(ApiError);
  expect([twice.status, twice.problem.title, twice.tries]).toEqual([409, "Already Reported", 1]);
  // A caller's mistake is not retried and names its field.
  const bad = await c
    .submit({ type: "turnstile", params: { sitekey: "bad key!", pageurl: "https://x.example/" } })
    .catch((e) => e);
  expect(bad.status).toBe(400);
  expect(bad.fields.map((f: { field: string }) => f.field)).toContain("params.sitekey");
  expect(c.stats()).toMatchObject({ retries: 0, errors: { "400": 1, "409": 1 } });
}, 60_000);

test("a submit whose reply is lost after the gateway stored it is retried with the same key and pays once", async () => {
  let cut = 0;
  const firstIds: string[] = [];
  // The real request goes through; its reply is thrown away, as a connection reset would.
  const lossy: typeof fetch = Object.assign(
    async (input: string | URL | Request, init?: RequestInit) => {
      const res = await fetch(input, init);
      if (init?.method === "POST" && cut++ === 0) {
        firstIds.push(((await res.json()) as { id: string }).id);
        throw new TypeError("socket hang up (the test dropped the reply)");
      }
      return res;
    },
    { preconnect: fetch.preconnect },
  );
  await Bun.sleep(200);
  s.emu.resetStats();
  const t0 = new Date(Date.now() - 1);
  const c = client({ fetch: lossy });
  const a = await c.submit(turnstile("lost-reply"));
  expect(a.replayed).toBe(true);
  expect(a.id).toBe(firstIds[0]!);
  expect((await c.wait(a.id, { timeoutMs: 30_000 })).status).toBe("completed");
  expect(await tasksSince(t0)).toBe(1);
  expect(s.emu.stats().submissions).toBe(1);
  expect(c.stats()).toMatchObject({ requests: 3, retries: 1, errors: { connection: 1 } });
}, 60_000);

test("429 on a quota: the client waits the Retry-After and the submit goes through", async () => {
  const c = client({ apiKey: QUOTA_KEY });
  await c.submit(turnstile("quota-1"));
  const t0 = Date.now();
  const b = await c.submit(turnstile("quota-2"));
  const waited = Date.now() - t0;
  expect(b.status).toBe("queued");
  expect(waited).toBeGreaterThanOrEqual(1000);
  expect(waited).toBeLessThan(6000);
  const st = c.stats();
  expect(st.errors["429"]).toBeGreaterThanOrEqual(1);
  expect(st.failovers).toBe(0);
  console.log(`[client] 429 then accepted after ${waited} ms (${st.errors["429"]} refusal(s))`);
}, 30_000);

test("a dead first region fails over to the second; after failBackMs a probe brings the client home", async () => {
  const dead = await deadUrl();
  const c = client({ regions: [dead, s.gatewayUrl] });
  const a = await c.submit(turnstile("failover"));
  expect((await c.wait(a.id, { timeoutMs: 30_000 })).status).toBe("completed");
  expect(c.stats()).toMatchObject({ failovers: 1, errors: { connection: 1 } });

  // Home: a front for the gateway that answers 503 while `down`.
  let down = true;
  const paths: string[] = [];
  const front = Bun.serve({
    port: 0,
    async fetch(req) {
      const u = new URL(req.url);
      paths.push(u.pathname);
      if (down) return Response.json({ title: "Down For Test", status: 503 }, { status: 503 });
      const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer();
      return fetch(`${s.gatewayUrl}${u.pathname}${u.search}`, { method: req.method, headers: req.headers, body });
    },
  });
  try {
    const h = client({ regions: [`http://127.0.0.1:${front.port}`, s.gatewayUrl], failBackMs: 500 });
    await h.submit(turnstile("failback-1"));
    await h.submit(turnstile("failback-2"));
    expect(paths).toEqual(["/v1/tasks"]);
    down = false;
    await Bun.sleep(600);
    const back = await h.submit(turnstile("failback-3"));
    expect(paths).toEqual(["/v1/tasks", "/readyz/accepting", "/v1/tasks"]);
    expect((await h.get(back.id)).id).toBe(back.id);
    expect(h.stats()).toMatchObject({ failovers: 1, failbacks: 1, errors: { "503": 1 } });
  } finally {
    front.stop(true);
  }
}, 60_000);

test("a callback the solver sent verifies with the key's secret; a changed body does not", async () => {
  const got: { body: string; headers: Headers }[] = [];
  const receiver = Bun.serve({
    port: 0,
    async fetch(req) {
      got.push({ body: await req.text(), headers: req.headers });
      return new Response("ok");
    },
  });
  try {
    const c = client();
    const secret = await c.webhookSecret();
    expect(secret).toBe(await clientSecret(s));
    const a = await c.submit(turnstile("callback", `http://127.0.0.1:${receiver.port}/hook`));
    await c.wait(a.id, { timeoutMs: 30_000 });
    for (let i = 0; i < 100 && got.length === 0; i++) await Bun.sleep(100);
    const cb = got[0]!;
    expect(verifyCallback({ body: cb.body, headers: cb.headers, secret, toleranceSec: 60 })).toMatchObject({
      ok: true,
    });
    const body = parseCallbackBody(JSON.parse(cb.body));
    expect([body.event, body.task.id, body.task.status]).toEqual(["task.completed", a.id, "completed"]);
    expect(body.deliveryId).toBe(cb.headers.get("x-pipeline-delivery")!);
    expect(verifyCallback({ body: `${cb.body} `, headers: cb.headers, secret })).toEqual({
      ok: false,
      reason: "bad_signature",
    });
  } finally {
    receiver.stop(true);
  }
}, 60_000);
