// The call logic over real local HTTP servers (Bun.serve): what is retried, where it goes, how long it waits.
import { afterAll, expect, test } from "bun:test";
import { createServer } from "node:net";
import { createClient } from "./client.ts";
import { ApiError, NetworkError } from "./errors.ts";
import { FAILOVER_SETTLE_MS } from "./transport.ts";

type Handler = (req: Request) => Response | Promise<Response>;
const servers: ReturnType<typeof Bun.serve>[] = [];
afterAll(() => {
  for (const s of servers) s.stop(true);
});
/** A server answering with `h`, and every request it saw. */
function serve(h: Handler) {
  const seen: { method: string; path: string; key: string | null }[] = [];
  const s = Bun.serve({
    port: 0,
    fetch: (req) => {
      seen.push({ method: req.method, path: new URL(req.url).pathname, key: req.headers.get("idempotency-key") });
      return h(req);
    },
  });
  servers.push(s);
  return { url: `http://127.0.0.1:${s.port}`, seen };
}
/** A port nothing listens on. */
async function deadUrl(): Promise<string> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return `http://127.0.0.1:${port}`;
}
const id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a01";
const accepted = () => Response.json({ id, status: "queued" }, { status: 202 });
const problem = (status: number, title: string, headers: Record<string, string> = {}, errors?: unknown) =>
  new Response(JSON.stringify({ type: "t", title, status, ...(errors ? { errors } : {}) }), {
    status,
    headers: { "content-type": "application/problem+json", ...headers },
  });
const task = { type: "turnstile", params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://e.x/" } } as const;

test("a 400 is not retried: its problem+json and errors[].field reach the caller", async () => {
  const a = serve(() => problem(400, "Invalid Task", {}, [{ field: "params.sitekey", message: "bad" }]));
  const c = createClient({ regions: [a.url], apiKey: "k", retry: { baseMs: 1 } });
  const err = await c.submit(task).catch((e) => e);
  expect(err).toBeInstanceOf(ApiError);
  expect(err.status).toBe(400);
  expect(err.fields).toEqual([{ field: "params.sitekey", message: "bad" }]);
  expect(a.seen.length).toBe(1);
  expect(c.stats()).toMatchObject({ requests: 1, retries: 0, errors: { "400": 1 } });
});

test("429 waits its Retry-After on the same region; the Idempotency-Key is the same on every try", async () => {
  let n = 0;
  const a = serve(() => (n++ === 0 ? problem(429, "Submission Rate Limited", { "retry-after": "1" }) : accepted()));
  const b = serve(accepted);
  const c = createClient({ regions: [a.url, b.url], apiKey: "k", retry: { baseMs: 1, maxMs: 5000 } });
  const t0 = Date.now();
  const r = await c.submit(task);
  expect(Date.now() - t0).toBeGreaterThanOrEqual(950);
  expect(r.id).toBe(id);
  expect(b.seen.length).toBe(0);
  const keys = a.seen.map((q) => q.key);
  expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
  expect(keys).toEqual([r.idempotencyKey, r.idempotencyKey]);
  expect(c.stats()).toMatchObject({ requests: 2, retries: 1, failovers: 0, errors: { "429": 1 } });
});

test("503 with x-try-regions goes at once to the named region (with the same key), skipping the next in the list", async () => {
  const a = serve(() => problem(503, "Region Fenced", { "retry-after": "1", "x-try-regions": "ash1" }));
  const b = serve(accepted);
  const ash = serve(accepted);
  const c = createClient({
    regions: [a.url, b.url, ash.url],
    regionNames: { fsn1: a.url, hel1: b.url, ash1: ash.url },
    apiKey: "k",
  });
  const t0 = Date.now();
  const r = await c.submit(task, { idempotencyKey: "order-42" });
  expect(Date.now() - t0).toBeLessThan(500);
  expect(b.seen.length).toBe(0);
  expect(ash.seen.map((q) => q.key)).toEqual(["order-42"]);
  expect(r.idempotencyKey).toBe("order-42");
  // The task's reads go to the region that accepted it.
  await c.get(id).catch(() => {});
  expect(ash.seen.length).toBe(2);
  expect(c.stats()).toMatchObject({ failovers: 1, errors: { "503": 1 } });
});

test("a dead home fails over; later calls stay away until failBackMs, then a probe of /readyz/accepting brings them home", async () => {
  let homeUp = false;
  const home = serve((req) => {
    if (!homeUp) return problem(503, "Queue Unavailable");
    return new URL(req.url).pathname === "/readyz/accepting" ? new Response("accepting") : accepted();
  });
  const other = serve(accepted);
  const c = createClient({ regions: [home.url, other.url], apiKey: "k", failBackMs: 300, retry: { baseMs: 1 } });
  await c.submit(task);
  await c.submit(task);
  expect(home.seen.length).toBe(1);
  expect(other.seen.length).toBe(2);
  homeUp = true;
  await Bun.sleep(350);
  await c.submit(task);
  expect(home.seen.map((q) => q.path)).toEqual(["/v1/tasks", "/readyz/accepting", "/v1/tasks"]);
  expect(c.stats()).toMatchObject({ failovers: 1, failbacks: 1 });
});

test("connection refused everywhere: the tries run out with a NetworkError, counted by kind", async () => {
  const c = createClient({
    regions: [await deadUrl(), await deadUrl()],
    apiKey: "k",
    retry: { attempts: 4, baseMs: 1 },
  });
  const err = await c.get(id).catch((e) => e);
  expect(err).toBeInstanceOf(NetworkError);
  expect(err.kind).toBe("connection");
  expect(c.stats()).toMatchObject({ requests: 4, retries: 3, errors: { connection: 4 } });
});

test("a try that outlives timeoutMs is a timeout, retried", async () => {
  let n = 0;
  const a = serve(async () => (n++ === 0 ? (await Bun.sleep(400), accepted()) : accepted()));
  const c = createClient({ regions: [a.url], apiKey: "k", timeoutMs: 100, retry: { baseMs: 1 } });
  expect((await c.submit(task)).id).toBe(id);
  expect(c.stats().errors).toEqual({ timeout: 1 });
});

test("a change sent to a region that is not the task's home follows the 409 x-home-region once", async () => {
  const view = {
    id,
    type: "turnstile",
    priority: "normal",
    status: "cancelled",
    attempts: 0,
    createdAt: "2026-12-06T12:00:00Z",
    updatedAt: "2026-12-06T12:00:00Z",
    completedAt: null,
  };
  const a = serve(() => problem(409, "Task Of Another Region", { "x-home-region": "hel1" }));
  const b = serve(() => Response.json(view));
  const c = createClient({ regions: [a.url, b.url], regionNames: { fsn1: a.url, hel1: b.url }, apiKey: "k" });
  expect((await c.cancel(id)).status).toBe("cancelled");
  expect(b.seen.map((q) => q.method)).toEqual(["DELETE"]);
  expect(c.stats()).toMatchObject({ redirects: 1, failovers: 0 });
  // With the shared region order, the id's last byte (01 = fsn1, 02 = hel1) sends it home directly.
  const c2 = createClient({
    regions: [a.url, b.url],
    regionNames: { fsn1: a.url, hel1: b.url },
    regionOrder: ["hel1", "fsn1"],
    apiKey: "k",
  });
  expect((await c2.cancel(id)).status).toBe("cancelled");
  expect(c2.stats()).toMatchObject({ requests: 1, redirects: 0 });
});

test("a write fails over at once from a refused connection; after a reset one (it may have been stored) it asks the same region again first, then fails over", async () => {
  const b = serve(accepted);
  const refused = createClient({ regions: [await deadUrl(), b.url], apiKey: "k" });
  let t0 = Date.now();
  await refused.submit(task);
  expect(Date.now() - t0).toBeLessThan(FAILOVER_SETTLE_MS);
  // A server that reads the request and closes the connection without a reply.
  const reset = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (sock) => void sock.end(), open() {} } });
  try {
    const c = createClient({ regions: [`http://127.0.0.1:${reset.port}`, b.url], apiKey: "k" });
    t0 = Date.now();
    await c.submit(task);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2 * FAILOVER_SETTLE_MS);
    expect(c.stats()).toMatchObject({ failovers: 1, errors: { connection: 2 } });
    // Reads are not writes: no settling.
    t0 = Date.now();
    const r = createClient({ regions: [`http://127.0.0.1:${reset.port}`, b.url], apiKey: "k" });
    await r.get(id).catch(() => {});
    expect(Date.now() - t0).toBeLessThan(FAILOVER_SETTLE_MS);
  } finally {
    reset.stop(true);
  }
});

test("a write that timed out where it was stored is asked there again and answered with its task: no second task in another region", async () => {
  // Region a stores the task but answers too late the first time (a slow gateway while the
  // regions are cut apart); region b does not know the key and would make a second task.
  let calls = 0;
  const a = serve(async () => {
    if (++calls === 1) await Bun.sleep(400);
    return accepted();
  });
  const b = serve(() =>
    Response.json({ id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a02", status: "queued" }, { status: 202 }),
  );
  const c = createClient({ regions: [a.url, b.url], apiKey: "k", timeoutMs: 200 });
  const r = await c.submit(task, { idempotencyKey: "k-1" });
  expect(r.id).toBe(id);
  expect(a.seen.map((x) => x.key)).toEqual(["k-1", "k-1"]);
  expect(b.seen).toEqual([]);
  expect(c.stats()).toMatchObject({ failovers: 0, errors: { timeout: 1 } });
});

test("events: a stream that ends before the final state is reopened with Last-Event-ID; waitSSE returns the final view", async () => {
  const v = (status: string) =>
    JSON.stringify({
      id,
      type: "turnstile",
      priority: "normal",
      status,
      attempts: 1,
      createdAt: "2026-12-06T12:00:00Z",
      updatedAt: "2026-12-06T12:00:00Z",
      completedAt: null,
    });
  const lastIds: (string | null)[] = [];
  const a = serve((req) => {
    lastIds.push(req.headers.get("last-event-id"));
    const text =
      lastIds.length === 1
        ? `event: state\nid: 1\ndata: ${v("queued")}\n\n: keep-alive\n\nevent: state\nid: 2\ndata: ${v("solving")}\n\n`
        : `event: state\nid: 3\ndata: ${v("cancelled")}\n\n`;
    return new Response(text, { headers: { "content-type": "text/event-stream" } });
  });
  const c = createClient({ regions: [a.url], apiKey: "k" });
  const seen: string[] = [];
  for await (const view of c.events(id)) seen.push(view.status);
  expect(seen).toEqual(["queued", "solving", "cancelled"]);
  expect(lastIds).toEqual([null, "2"]);
  expect((await c.waitSSE(id, { timeoutMs: 5000 })).status).toBe("cancelled");
});

test("a read answered 503 with x-home-region (the home holds the result) goes to that home next", async () => {
  const view = {
    id,
    type: "turnstile",
    priority: "normal",
    status: "completed",
    attempts: 1,
    createdAt: "2026-12-06T12:00:00Z",
    updatedAt: "2026-12-06T12:00:00Z",
    completedAt: "2026-12-06T12:00:01Z",
    result: { token: "t", expiresAt: null },
  };
  const a = serve(() => problem(503, "Result Held By Home Region", { "retry-after": "1", "x-home-region": "ash1" }));
  const b = serve(() => Response.json(view));
  const ash = serve(() => Response.json(view));
  const c = createClient({ regions: [a.url, b.url, ash.url], regionNames: { ash1: ash.url }, apiKey: "k" });
  expect((await c.get(id)).result?.token).toBe("t");
  expect([b.seen.length, ash.seen.length]).toEqual([0, 1]);
});

test("a report retried after its reply was lost takes the 409 Already Reported as done", async () => {
  let reports = 0;
  const a = serve(() =>
    reports++ === 0
      ? Response.json({ id, accepted: false, status: "pending" }, { status: 202 })
      : problem(409, "Already Reported"),
  );
  let first = true;
  const lossy = Object.assign(
    async (input: string | URL | Request, init?: RequestInit) => {
      const res = await fetch(input, init);
      if (first) {
        first = false;
        await res.text();
        throw new TypeError("socket closed");
      }
      return res;
    },
    { preconnect: fetch.preconnect },
  );
  const c = createClient({ regions: [a.url], apiKey: "k", fetch: lossy, retry: { baseMs: 1 } });
  expect(await c.report(id, "bad")).toEqual({ id, accepted: false, status: "pending" });
  expect(a.seen.length).toBe(2);
  // Without a lost reply, a second report is the caller's to see.
  const err = await createClient({ regions: [a.url], apiKey: "k" })
    .report(id, "bad")
    .catch((e) => e);
  expect([err.status, err.tries]).toEqual([409, 1]);
});
