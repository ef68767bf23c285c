import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { freePort } from "@pipeline/devstack";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, ensureStreams, type NatsConnection } from "@pipeline/shared/nats";
import { parseCidr } from "@pipeline/shared/net";
import { streams } from "@pipeline/shared/subjects";
import { createTaskQueue, createTaskWatcher } from "../adapters/nats.ts";
import { createTaskStore } from "../adapters/pg.ts";
import { createApiKeys } from "../domain/api-keys.ts";
import { createApp } from "./app.ts";

const REGION = "gw";
let nats: TestNats;
let tdb: TestDatabase;
let nc: NatsConnection;
let jsm: JetStreamManager;
let database: Database;
let app: ReturnType<typeof createApp>;

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats(), createTestDatabase("gw")]);
  nc = await connectNats(nats.url, "gateway-test", nats.auth("admin"));
  jsm = await jetstreamManager(nc);
  await ensureStreams(jsm, { region: REGION });
  database = openDatabase(tdb.url, { max: 5 });
  app = createApp({
    config: {
      REGION,
      MAX_BODY_BYTES: 64 * 1024,
      IMAGE_MAX_BYTES: 4096,
      MAX_WAIT_SECONDS: 5,
      TASK_DEADLINE_MS: 600_000,
    },
    store: createTaskStore(database.db),
    queue: createTaskQueue(nc, REGION, 2000),
    watcher: createTaskWatcher(nc, REGION),
    apiKeys: createApiKeys(["client-a-key", "client-b-key"]),
    log: createLogger("gateway-test", { level: "silent" }),
  });
});
afterAll(async () => {
  await nc.close();
  await database.close();
  await Promise.all([nats.dispose(), tdb.drop()]);
});

const turnstile = {
  type: "turnstile",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/login" },
};
async function post(body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return app.request("/v1/tasks", {
    method: "POST",
    headers: { authorization: "Bearer client-a-key", "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}
const counts = async () => {
  const [{ n }] = (await database.sql`select count(*)::int as n from tasks`) as unknown as [{ n: number }];
  const info = await jsm.streams.info(streams.tasks(REGION));
  return { rows: n, messages: info.state.messages };
};

describe("POST /v1/tasks", () => {
  test("202 only once the row is in Postgres and the message in JetStream", async () => {
    const before = await counts();
    const res = await post(turnstile);
    expect(res.status).toBe(202);
    const body = (await res.json()) as { id: string; status: string };
    expect(body.status).toBe("queued");
    const after = await counts();
    expect(after).toEqual({ rows: before.rows + 1, messages: before.messages + 1 });
  });

  test("the same Idempotency-Key and body return the same task; another body is 422", async () => {
    const a = await post(turnstile, { "idempotency-key": "order-1" });
    const b = await post({ ...turnstile, params: { ...turnstile.params } }, { "idempotency-key": "order-1" });
    expect(a.status).toBe(202);
    expect(b.status).toBe(202);
    const ida = ((await a.json()) as { id: string }).id;
    expect(((await b.json()) as { id: string }).id).toBe(ida);
    expect(b.headers.get("idempotent-replayed")).toBe("true");
    const before = await counts();
    const c = await post(
      { ...turnstile, params: { ...turnstile.params, pageurl: "https://example.com/other" } },
      { "idempotency-key": "order-1" },
    );
    expect(c.status).toBe(422);
    expect(c.headers.get("content-type")).toContain("application/problem+json");
    expect(((await c.json()) as { errors: Array<{ field: string }> }).errors[0]!.field).toBe("header.idempotency-key");
    expect(await counts()).toEqual(before);
  });

  const bad: Array<[string, () => Response | Promise<Response>, number, string]> = [
    [
      "missing key",
      () =>
        app.request("/v1/tasks", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(turnstile),
        }),
      401,
      "header.authorization",
    ],
    ["wrong key", () => post(turnstile, { authorization: "Bearer nope-nope" }), 401, "header.authorization"],
    ["unknown type", () => post({ type: "hcaptcha", params: {} }), 400, "type"],
    ["missing sitekey", () => post({ type: "turnstile", params: { pageurl: "https://e.com" } }), 400, "params.sitekey"],
    ["malformed JSON", () => post("{ nope"), 400, "(body)"],
    [
      "not JSON",
      () => post("a=b", { "content-type": "application/x-www-form-urlencoded" }),
      415,
      "header.content-type",
    ],
    ["oversized body", () => post({ type: "image", params: { body: "A".repeat(70 * 1024) } }), 413, "(body)"],
    [
      "oversized image",
      () => post({ type: "image", params: { body: Buffer.alloc(5000, 1).toString("base64") } }),
      400,
      "params.body",
    ],
    ["bad idempotency key", () => post(turnstile, { "idempotency-key": "has space" }), 400, "header.idempotency-key"],
    ["bad priority", () => post({ ...turnstile, priority: "urgent" }), 400, "priority"],
    // The SSRF policy (docs/security.md): a callback may only go to a public https host.
    [
      "loopback callbackUrl",
      () => post({ ...turnstile, callbackUrl: "https://127.0.0.1:8443/hook" }),
      400,
      "callbackUrl",
    ],
    [
      "hex loopback callbackUrl",
      () => post({ ...turnstile, callbackUrl: "https://0x7f000001/hook" }),
      400,
      "callbackUrl",
    ],
    ["IPv6 loopback callbackUrl", () => post({ ...turnstile, callbackUrl: "https://[::1]/hook" }), 400, "callbackUrl"],
    ["private callbackUrl", () => post({ ...turnstile, callbackUrl: "https://10.0.0.7/hook" }), 400, "callbackUrl"],
    [
      "cloud metadata callbackUrl",
      () => post({ ...turnstile, callbackUrl: "https://169.254.169.254/latest/meta-data/" }),
      400,
      "callbackUrl",
    ],
    ["localhost callbackUrl", () => post({ ...turnstile, callbackUrl: "https://localhost/hook" }), 400, "callbackUrl"],
    [
      "callbackUrl with userinfo",
      () => post({ ...turnstile, callbackUrl: "https://user:pass@hooks.example.com/hook" }),
      400,
      "callbackUrl",
    ],
    [
      "plain http callbackUrl",
      () => post({ ...turnstile, callbackUrl: "http://hooks.example.com/hook" }),
      400,
      "callbackUrl",
    ],
  ];
  for (const [name, send, status, field] of bad) {
    test(`${name}: ${status} problem+json naming ${field}, no row, no message`, async () => {
      const before = await counts();
      const res = await send();
      expect(res.status).toBe(status);
      expect(res.headers.get("content-type")).toContain("application/problem+json");
      const problem = (await res.json()) as {
        status: number;
        title: string;
        requestId: string;
        errors: Array<{ field: string }>;
      };
      expect(problem.status).toBe(status);
      expect(problem.requestId).toBeTruthy();
      expect(problem.errors.map((e) => e.field)).toContain(field);
      expect(await counts()).toEqual(before);
    });
  }
});

describe("callbackUrl", () => {
  test("a public https callbackUrl is stored as sent", async () => {
    const res = await post({ ...turnstile, callbackUrl: "https://hooks.example.com/cb?x=1" });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    const [row] = (await database.sql`select callback_url from tasks where id = ${id}`) as unknown as [
      { callback_url: string },
    ];
    expect(row.callback_url).toBe("https://hooks.example.com/cb?x=1");
  });

  test("the refusal names the field and the kind of address, never the URL's query", async () => {
    const res = await post({ ...turnstile, callbackUrl: "https://0x7f000001/hook?token=s3cret" });
    expect(res.status).toBe(400);
    const text = await res.text();
    expect(text).not.toContain("s3cret");
    expect((JSON.parse(text) as { errors: unknown }).errors).toEqual([
      { field: "callbackUrl", message: "must not point to a loopback address (127.0.0.1)" },
    ]);
  });

  test("WEBHOOK_ALLOW_HTTP and WEBHOOK_ALLOW_PRIVATE (dev and tests) let http://127.0.0.1 through", async () => {
    const dev = createApp({
      config: {
        REGION,
        MAX_BODY_BYTES: 64 * 1024,
        IMAGE_MAX_BYTES: 4096,
        MAX_WAIT_SECONDS: 5,
        TASK_DEADLINE_MS: 600_000,
        WEBHOOK_ALLOW_HTTP: true,
        WEBHOOK_ALLOW_PRIVATE: true,
      },
      store: createTaskStore(database.db),
      queue: createTaskQueue(nc, REGION, 2000),
      watcher: createTaskWatcher(nc, REGION),
      apiKeys: createApiKeys(["client-a-key"]),
      log: createLogger("gateway-test", { level: "silent" }),
    });
    const res = await dev.request("/v1/tasks", {
      method: "POST",
      headers: { authorization: "Bearer client-a-key", "content-type": "application/json" },
      body: JSON.stringify({ ...turnstile, callbackUrl: "http://127.0.0.1:9/hook" }),
    });
    expect(res.status).toBe(202);
    // Link-local (cloud metadata) stays refused even then.
    const meta = await dev.request("/v1/tasks", {
      method: "POST",
      headers: { authorization: "Bearer client-a-key", "content-type": "application/json" },
      body: JSON.stringify({ ...turnstile, callbackUrl: "http://169.254.169.254/" }),
    });
    expect(meta.status).toBe(400);
  });
});

describe("GET /v1/tasks/:id", () => {
  test("the owner reads a queued task; another key gets 404", async () => {
    const { id } = (await (await post(turnstile)).json()) as { id: string };
    const mine = await app.request(`/v1/tasks/${id}`, { headers: { authorization: "Bearer client-a-key" } });
    expect(mine.status).toBe(200);
    expect(((await mine.json()) as { status: string }).status).toBe("queued");
    const theirs = await app.request(`/v1/tasks/${id}`, { headers: { authorization: "Bearer client-b-key" } });
    expect(theirs.status).toBe(404);
  });

  test("?wait=N returns as soon as the task completes", async () => {
    const { id } = (await (await post(turnstile)).json()) as { id: string };
    const t0 = Date.now();
    const pending = app.request(`/v1/tasks/${id}?wait=5`, { headers: { authorization: "Bearer client-a-key" } });
    await Bun.sleep(300);
    await database.sql`update tasks set state='completed', token='T-1', token_expires_at=now()+interval '2 minutes', completed_at=now(), version=version+1 where id=${id}`;
    await nc.flush();
    nc.publish(`events.${REGION}.completed`, JSON.stringify({ taskId: id }));
    const res = await pending;
    const view = (await res.json()) as { status: string; result: { token: string } };
    expect(view.status).toBe("completed");
    expect(view.result.token).toBe("T-1");
    expect(Date.now() - t0).toBeLessThan(2500);
  });

  test("?wait beyond the maximum is a 400 naming query.wait", async () => {
    const { id } = (await (await post(turnstile)).json()) as { id: string };
    const res = await app.request(`/v1/tasks/${id}?wait=999`, { headers: { authorization: "Bearer client-a-key" } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { errors: Array<{ field: string }> }).errors[0]!.field).toBe("query.wait");
  });

  test("a view carrying a token is never cached (Cache-Control: no-store), nor is an error; a provider account code is shown as PROVIDER_ERROR (issue 14, low)", async () => {
    const { id } = (await (await post(turnstile)).json()) as { id: string };
    await database.sql`update tasks set state='completed', token='T-NS', token_expires_at=now()+interval '2 minutes', completed_at=now(), version=version+1 where id=${id}`;
    const res = await app.request(`/v1/tasks/${id}`, { headers: { authorization: "Bearer client-a-key" } });
    expect(((await res.json()) as { result: { token: string } }).result.token).toBe("T-NS");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(
      (await app.request(`/v1/tasks/nope`, { headers: { authorization: "Bearer client-a-key" } })).headers.get(
        "cache-control",
      ),
    ).toBe("no-store");
    const sse = await app.request(`/v1/tasks/${id}/events`, { headers: { authorization: "Bearer client-a-key" } });
    expect(sse.headers.get("cache-control")).toContain("no-store");
    await sse.text();
    const failed = (await (await post(turnstile)).json()) as { id: string };
    await database.sql`update tasks set state='failed', error_code='ERROR_ZERO_BALANCE', error_message='balance 0.00 USD on account 4711', completed_at=now(), version=version+1 where id=${failed.id}`;
    const text = await (
      await app.request(`/v1/tasks/${failed.id}`, { headers: { authorization: "Bearer client-a-key" } })
    ).text();
    expect(text).not.toContain("ZERO_BALANCE");
    expect(text).not.toContain("4711");
    expect((JSON.parse(text) as { error: { code: string } }).error.code).toBe("PROVIDER_ERROR");
  });

  test("an id that is not a uuid is 404", async () => {
    const res = await app.request(`/v1/tasks/nope`, { headers: { authorization: "Bearer client-a-key" } });
    expect(res.status).toBe(404);
  });
});

test("health, readiness and the OpenAPI document", async () => {
  expect((await app.request("/healthz")).status).toBe(200);
  const ready = await app.request("/readyz");
  expect(ready.status).toBe(200);
  expect(await ready.json()).toMatchObject({ nats: "ok", postgres: "ok" });
  // The load balancers' check: this app has no fence (one region), so ready is accepting.
  const accepting = await app.request("/readyz/accepting");
  expect([accepting.status, ((await accepting.json()) as { status: string }).status]).toEqual([200, "accepting"]);
  const doc = (await (await app.request("/openapi.json")).json()) as {
    paths: Record<string, unknown>;
    components: { schemas: { TaskRequest: unknown } };
  };
  expect(Object.keys(doc.paths)).toContain("/v1/tasks");
  expect(Object.keys(doc.paths)).toContain("/readyz/accepting");
  expect(JSON.stringify(doc.components.schemas.TaskRequest)).toContain("turnstile");
});

test("readiness says down without the driver's error text (no host, user or database name)", async () => {
  const port = await freePort(); // nothing listens there
  const broken = openDatabase(`postgres://secret_user@127.0.0.1:${port}/secret_db`, { max: 1 });
  try {
    const down = createApp({
      config: {
        REGION,
        MAX_BODY_BYTES: 64 * 1024,
        IMAGE_MAX_BYTES: 4096,
        MAX_WAIT_SECONDS: 5,
        TASK_DEADLINE_MS: 600_000,
      },
      store: createTaskStore(broken.db),
      queue: createTaskQueue(nc, REGION, 2000),
      watcher: createTaskWatcher(nc, REGION),
      apiKeys: createApiKeys(["client-a-key"]),
      log: createLogger("gateway-test", { level: "silent" }),
    });
    const res = await down.request("/readyz");
    expect(res.status).toBe(503);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ status: "not ready", nats: "ok", postgres: "down" });
    expect(text).not.toMatch(/secret|127\.0\.0\.1|ECONNREFUSED/);
  } finally {
    await broken.close().catch(() => {});
  }
});

test("/readyz is answered from a cached check: 200 requests on both listeners within a second cost one Postgres and one NATS round trip", async () => {
  const { createMetricsApp } = await import("./app.ts");
  const { createReadiness } = await import("./readiness.ts");
  const realStore = createTaskStore(database.db);
  const realQueue = createTaskQueue(nc, REGION, 2000);
  const pings = { postgres: 0, nats: 0 };
  const store = { ...realStore, ping: () => (pings.postgres++, realStore.ping()) };
  const queue = { ...realQueue, ping: () => (pings.nats++, realQueue.ping()) };
  const log = createLogger("gateway-test", { level: "silent" });
  const readiness = createReadiness({ store, queue, log });
  const clients = createApp({
    config: {
      REGION,
      MAX_BODY_BYTES: 64 * 1024,
      IMAGE_MAX_BYTES: 4096,
      MAX_WAIT_SECONDS: 5,
      TASK_DEADLINE_MS: 600_000,
    },
    store,
    queue,
    watcher: createTaskWatcher(nc, REGION),
    apiKeys: createApiKeys(["client-a-key"]),
    log,
    readiness,
  });
  const ops = createMetricsApp({ store, queue, log, readiness });
  const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 ? clients : ops).request("/readyz")));
  expect(answers.every((r) => r.status === 200)).toBe(true);
  for (let i = 0; i < 50; i++) expect((await clients.request("/readyz")).status).toBe(200);
  // Before the cache: 250 requests were 250 pings of each.
  expect(pings).toEqual({ postgres: 1, nats: 1 });
  await Bun.sleep(1050);
  expect((await ops.request("/readyz")).status).toBe(200);
  expect(pings).toEqual({ postgres: 2, nats: 2 });
});

test("when JetStream cannot take the task, the answer is 503 and no row is left", async () => {
  await jsm.streams.delete(streams.tasks(REGION));
  const before = await counts().catch(() => undefined);
  expect(before).toBeUndefined();
  const [{ n: rowsBefore }] = (await database.sql`select count(*)::int as n from tasks`) as unknown as [{ n: number }];
  const res = await post(turnstile);
  expect(res.status).toBe(503);
  const [{ n: rowsAfter }] = (await database.sql`select count(*)::int as n from tasks`) as unknown as [{ n: number }];
  expect(rowsAfter).toBe(rowsBefore);
  await ensureStreams(jsm, { region: REGION });
});

describe("waiting requests: caps, client aborts, wake-ups, stream lifetime (issue 14.5)", () => {
  let capped: ReturnType<typeof createApp>;
  let reads = 0;
  let watcher: ReturnType<typeof createTaskWatcher>;
  beforeAll(() => {
    const store = createTaskStore(database.db);
    watcher = createTaskWatcher(nc, REGION);
    capped = createApp({
      config: {
        REGION,
        MAX_BODY_BYTES: 64 * 1024,
        IMAGE_MAX_BYTES: 4096,
        MAX_WAIT_SECONDS: 30,
        TASK_DEADLINE_MS: 600_000,
        LONG_POLL_MAX_PER_KEY: 2,
        LONG_POLL_MAX_TOTAL: 3,
        LONG_POLL_RECHECK_MS: 5000,
        SSE_MAX_SECONDS: 1,
      },
      // Counts the task reads, to see what a waiting request costs Postgres.
      store: { ...store, get: (id: string) => (reads++, store.get(id)) },
      queue: createTaskQueue(nc, REGION, 2000),
      watcher,
      apiKeys: createApiKeys(["client-a-key", "client-b-key", "client-c-key"]),
      log: createLogger("gateway-test", { level: "silent" }),
    });
  });
  const queued = async (key = "client-a-key") =>
    (
      (await (
        await capped.request("/v1/tasks", {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify(turnstile),
        })
      ).json()) as { id: string }
    ).id;
  const waitOn = async (id: string, key: string, signal?: AbortSignal): Promise<Response> =>
    capped.request(`/v1/tasks/${id}?wait=30`, {
      headers: { authorization: `Bearer ${key}` },
      ...(signal ? { signal } : {}),
    });

  test("a key holds at most LONG_POLL_MAX_PER_KEY waits, the gateway LONG_POLL_MAX_TOTAL: then 429 with Retry-After, naming query.wait", async () => {
    const id = await queued();
    const aborts = [new AbortController(), new AbortController(), new AbortController()];
    const held = [waitOn(id, "client-a-key", aborts[0]!.signal), waitOn(id, "client-a-key", aborts[1]!.signal)];
    await Bun.sleep(200);
    const third = await waitOn(id, "client-a-key");
    expect(third.status).toBe(429);
    expect(third.headers.get("retry-after")).toBe("1");
    expect(((await third.json()) as { errors: Array<{ field: string }> }).errors[0]!.field).toBe("query.wait");
    // Another key still gets one (the total is 3), then the total is reached for everyone.
    const other = waitOn(await queued("client-b-key"), "client-b-key", aborts[2]!.signal);
    await Bun.sleep(200);
    expect((await waitOn(await queued("client-c-key"), "client-c-key")).status).toBe(429);
    // A read without ?wait is never capped.
    expect(
      (await capped.request(`/v1/tasks/${id}`, { headers: { authorization: "Bearer client-a-key" } })).status,
    ).toBe(200);
    for (const a of aborts) a.abort();
    await Promise.allSettled([...held, other]);
  });

  test("a client that goes away frees its slot and its watch at once, and nothing reads the task for it any more", async () => {
    const id = await queued();
    const gone = new AbortController();
    const before = watcher.size();
    const pending = waitOn(id, "client-a-key", gone.signal).catch(() => undefined);
    await Bun.sleep(300);
    expect(watcher.size()).toBe(before + 1);
    gone.abort();
    await pending;
    await Bun.sleep(100);
    expect(watcher.size()).toBe(before);
    const readsAfter = reads;
    await Bun.sleep(1500);
    expect(reads).toBe(readsAfter);
    // Its slots are back: two new waits of the same key are accepted.
    const again = [new AbortController(), new AbortController()];
    const two = again.map((a) => waitOn(id, "client-a-key", a.signal));
    await Bun.sleep(200);
    expect(watcher.size()).toBe(before + 2);
    for (const a of again) a.abort();
    await Promise.allSettled(two);
  });

  test("a waiting request re-reads its task on an event, not every second", async () => {
    const id = await queued("client-b-key");
    const stop = new AbortController();
    const readsBefore = reads;
    const pending = waitOn(id, "client-b-key", stop.signal).catch(() => undefined);
    await Bun.sleep(3000);
    // One read at the start; no event, and the re-check is 5 s away.
    expect(reads - readsBefore).toBe(1);
    await database.sql`update tasks set state='completed', token='T-2', token_expires_at=now()+interval '2 minutes', completed_at=now(), version=version+1 where id=${id}`;
    nc.publish(`events.${REGION}.completed`, JSON.stringify({ taskId: id }));
    const res = (await pending) as Response;
    expect(((await res.json()) as { status: string }).status).toBe("completed");
    expect(reads - readsBefore).toBe(2);
  });

  test("an event stream ends after SSE_MAX_SECONDS and gives its slot back", async () => {
    const id = await queued("client-c-key");
    const t0 = Date.now();
    const res = await capped.request(`/v1/tasks/${id}/events`, { headers: { authorization: "Bearer client-c-key" } });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain("event: state");
    expect(Date.now() - t0).toBeLessThan(2500);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    // Its slot is back: the key opens two more.
    const aborts = [new AbortController(), new AbortController()];
    const two = aborts.map((a) => waitOn(id, "client-c-key", a.signal));
    await Bun.sleep(200);
    expect((await waitOn(id, "client-c-key")).status).toBe(429);
    for (const a of aborts) a.abort();
    await Promise.allSettled(two);
  });
});

test("the tasks-by-state gauge reads Postgres at most once per interval, whatever the scrape rate (issue 14.7)", async () => {
  const { createGatewayMetrics } = await import("../adapters/metrics.ts");
  let t = 1_000_000;
  const m = createGatewayMetrics(database.db, { countsEveryMs: 15_000, now: () => t });
  const scrape = async () => (await m.response()).text();
  const first = await scrape();
  expect(first).toMatch(/pipeline_tasks\{state="queued",type="turnstile",app="gateway"\} \d+/);
  for (let i = 0; i < 5; i++) await scrape();
  expect(m.countReads()).toBe(1);
  t += 15_000;
  await scrape();
  expect(m.countReads()).toBe(2);
});

test("POST /retry of a failed task whose params retention erased is a 409 naming path.id, and changes nothing", async () => {
  const { id } = (await (await post(turnstile)).json()) as { id: string };
  await database.sql`update tasks set state = 'failed', error_code = 'MAX_ATTEMPTS', params = '{}'::jsonb, version = version + 1 where id = ${id}`;
  const [before] = await database.sql<
    { state: string; redrives: number; version: number }[]
  >`select state, redrives, version from tasks where id = ${id}`;
  const res = await app.request(`/v1/tasks/${id}/retry`, {
    method: "POST",
    headers: { authorization: "Bearer client-a-key" },
  });
  expect(res.status).toBe(409);
  expect(((await res.json()) as { errors: Array<{ field: string }> }).errors[0]!.field).toBe("path.id");
  const [after] = await database.sql<
    { state: string; redrives: number; version: number }[]
  >`select state, redrives, version from tasks where id = ${id}`;
  expect(after).toEqual(before!);
});

test("GET /v1/webhook-secret hands each client its own signing secret (and the previous one during a rotation); none without a master (issue 14.3)", async () => {
  const { clientWebhookSecret } = await import("@pipeline/shared/webhooks");
  const signed = createApp({
    config: {
      REGION,
      MAX_BODY_BYTES: 64 * 1024,
      IMAGE_MAX_BYTES: 4096,
      MAX_WAIT_SECONDS: 5,
      TASK_DEADLINE_MS: 600_000,
      WEBHOOK_SECRET: "master-secret-0002",
      WEBHOOK_SECRET_PREVIOUS: "master-secret-0001",
    },
    store: createTaskStore(database.db),
    queue: createTaskQueue(nc, REGION, 2000),
    watcher: createTaskWatcher(nc, REGION),
    apiKeys: createApiKeys(["client-a-key", "client-b-key"]),
    log: createLogger("gateway-test", { level: "silent" }),
  });
  const get = (a: ReturnType<typeof createApp>, key?: string) =>
    a.request("/v1/webhook-secret", { headers: key ? { authorization: `Bearer ${key}` } : {} });
  const ra = await get(signed, "client-a-key");
  const rb = await get(signed, "client-b-key");
  expect(ra.status).toBe(200);
  expect(ra.headers.get("cache-control")).toBe("no-store");
  const a = (await ra.json()) as { clientId: string; secret: string; previous: string };
  const b = (await rb.json()) as { clientId: string; secret: string; previous: string };
  expect(a.secret).not.toBe(b.secret);
  expect(a.secret).toBe(clientWebhookSecret("master-secret-0002", a.clientId));
  expect(a.previous).toBe(clientWebhookSecret("master-secret-0001", a.clientId));
  expect(JSON.stringify([a, b])).not.toContain("master-secret");
  expect((await get(signed)).status).toBe(401);
  expect((await get(signed, "nope-not-a-key")).status).toBe(401);
  expect((await get(app, "client-a-key")).status).toBe(404);
});

test("GET /v1/webhook-secret after one client's secret is rotated alone (WEBHOOK_CLIENT_GENERATIONS): its new secret and the previous generation; the other client's is unchanged", async () => {
  const { clientWebhookSecret } = await import("@pipeline/shared/webhooks");
  const { createApiKeys: keys } = await import("../domain/api-keys.ts");
  const apiKeys = keys(["client-a-key", "client-b-key"]);
  const a = apiKeys.clientOf("client-a-key")!;
  const b = apiKeys.clientOf("client-b-key")!;
  const app = createApp({
    config: {
      REGION,
      MAX_BODY_BYTES: 64 * 1024,
      IMAGE_MAX_BYTES: 4096,
      MAX_WAIT_SECONDS: 5,
      TASK_DEADLINE_MS: 600_000,
      WEBHOOK_SECRET: "master-secret-0002",
      WEBHOOK_CLIENT_GENERATIONS: { [a]: { current: 1, previous: 0 } },
    },
    store: createTaskStore(database.db),
    queue: createTaskQueue(nc, REGION, 2000),
    watcher: createTaskWatcher(nc, REGION),
    apiKeys,
    log: createLogger("gateway-test", { level: "silent" }),
  });
  const get = async (key: string) =>
    (await app.request("/v1/webhook-secret", { headers: { authorization: `Bearer ${key}` } })).json() as Promise<{
      secret: string;
      previous?: string;
    }>;
  const ra = await get("client-a-key");
  expect(ra.secret).toBe(clientWebhookSecret("master-secret-0002", a, 1));
  expect(ra.previous).toBe(clientWebhookSecret("master-secret-0002", a));
  const rb = await get("client-b-key");
  expect(rb).toEqual({ secret: clientWebhookSecret("master-secret-0002", b), clientId: b } as never);
});

describe("failed authentication is throttled per (address, key) and per address", () => {
  const from = (address: string) => ({ requestIP: () => ({ address, family: "IPv4", port: 1 }) });
  const lines: string[] = [];
  const throttled = (extra: Partial<Parameters<typeof createApp>[0]["config"]> = {}) =>
    createApp({
      config: {
        REGION,
        MAX_BODY_BYTES: 64 * 1024,
        IMAGE_MAX_BYTES: 4096,
        MAX_WAIT_SECONDS: 5,
        TASK_DEADLINE_MS: 600_000,
        AUTH_FAIL_MAX: 3,
        AUTH_FAIL_MAX_PER_SOURCE: 5,
        AUTH_FAIL_WINDOW_MS: 60_000,
        ...extra,
      },
      store: createTaskStore(database.db),
      queue: createTaskQueue(nc, REGION, 2000),
      watcher: createTaskWatcher(nc, REGION),
      apiKeys: createApiKeys(["client-a-key", "client-b-key"]),
      log: createLogger("gateway-test", { level: "info", destination: { write: (l: string) => void lines.push(l) } }),
    });
  const get = (
    a: ReturnType<typeof createApp>,
    ip: string,
    key?: string,
    path = "/v1/webhook-secret",
    headers: Record<string, string> = {},
  ) => a.request(path, { headers: { ...headers, ...(key ? { authorization: `Bearer ${key}` } : {}) } }, from(ip));
  const TASK = "/v1/tasks/00000000-0000-4000-8000-000000000000";

  test("a key guesser (a new key each time) gets 429 with Retry-After at its address after AUTH_FAIL_MAX_PER_SOURCE failures, even with a good key; other addresses are not affected; no key is logged", async () => {
    lines.length = 0;
    const a = throttled();
    // A missing key is not a guess: it does not count.
    for (let i = 0; i < 7; i++) expect((await get(a, "203.0.113.5")).status).toBe(401);
    for (let i = 0; i < 5; i++) expect((await get(a, "203.0.113.5", `guess-${i}`)).status).toBe(401);
    const refused = await get(a, "203.0.113.5", "client-a-key", TASK);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(59);
    expect(((await refused.json()) as { errors: Array<{ field: string }> }).errors[0]!.field).toBe(
      "header.authorization",
    );
    // The facade answers 2Captcha's code for it.
    const facade = await a.request("/res.php?key=client-a-key&action=getbalance", {}, from("203.0.113.5"));
    expect(await facade.text()).toBe("IP_BANNED");
    expect(facade.headers.get("retry-after")).toBeTruthy();
    // Another address with a good key is served; a good key does not lift the throttle.
    expect((await get(a, "198.51.100.7", "client-b-key", TASK)).status).toBe(404);
    expect((await get(a, "203.0.113.5", "client-a-key")).status).toBe(429);
    // One warning naming the source; no key (neither the guesses nor the good one) in any line.
    const warned = lines.filter((l) => l.includes("failed authentications throttled"));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain("203.0.113.5");
    for (const l of lines) for (const k of ["guess-", "client-a-key", "client-b-key"]) expect(l).not.toContain(k);
  });

  test("one client repeating a wrong key is throttled for that key only: a valid key from the same address (a NAT, an office) still passes", async () => {
    const a = throttled();
    for (let i = 0; i < 3; i++) expect((await get(a, "192.0.2.44", "revoked-key-of-x", TASK)).status).toBe(401);
    // Today's per-address throttle refused everything from the address here.
    for (let i = 0; i < 20; i++) expect((await get(a, "192.0.2.44", "revoked-key-of-x", TASK)).status).toBe(429);
    expect((await get(a, "192.0.2.44", "client-a-key", TASK)).status).toBe(404);
    expect(
      await (await a.request("/res.php?key=client-b-key&action=getbalance", {}, from("192.0.2.44"))).text(),
    ).not.toBe("IP_BANNED");
  });

  test("behind the load balancer (GATEWAY_TRUSTED_PROXIES), 20 bad requests of one client do not lock out the others: the reviewer's lockout", async () => {
    const LB = "10.0.1.5";
    const a = throttled({ GATEWAY_TRUSTED_PROXIES: [parseCidr("10.0.1.0/24")!] });
    const via = (client: string) => ({ "x-forwarded-for": client });
    for (let i = 0; i < 20; i++)
      expect((await get(a, LB, `wrong-key-${i}`, TASK, via("198.51.100.20"))).status).toBe(i < 5 ? 401 : 429);
    // Every other client of the load balancer is served, with the REST API and the facade.
    expect((await get(a, LB, "client-a-key", TASK, via("198.51.100.30"))).status).toBe(404);
    const facade = await a.request(
      "/res.php?key=client-b-key&action=getbalance",
      { headers: via("198.51.100.31") },
      from(LB),
    );
    expect(await facade.text()).not.toBe("IP_BANNED");
    // The guesser's own address stays refused, whichever client address it forges to the left.
    expect((await get(a, LB, "client-a-key", TASK, { "x-forwarded-for": "203.0.113.99, 198.51.100.20" })).status).toBe(
      429,
    );
  });

  test("facade guesses count too", async () => {
    const a = throttled();
    for (let i = 0; i < 5; i++)
      expect(await (await a.request(`/res.php?key=guess-${i}&action=getbalance`, {}, from("192.0.2.9"))).text()).toBe(
        "ERROR_WRONG_USER_KEY",
      );
    expect(await (await a.request(`/res.php?key=guess-x&action=getbalance`, {}, from("192.0.2.9"))).text()).toBe(
      "IP_BANNED",
    );
  });

  test("X-Forwarded-For is believed only from a trusted proxy, and only as far as the chain runs through trusted proxies; an unknown proxy is warned about once", async () => {
    const { sourceOf } = await import("./auth.ts");
    const { Hono } = await import("hono");
    const trusted = [parseCidr("10.0.1.0/24")!, parseCidr("fd00::/8")!];
    const h = new Hono();
    h.get("/", (c) => c.text(`${sourceOf(c, trusted)} ${sourceOf(c, [])}`));
    const ask = async (peer: string, xff?: string) =>
      (await h.request("/", { headers: xff ? { "x-forwarded-for": xff } : {} }, from(peer))).text();
    expect(await ask("10.0.1.5", "1.2.3.4, 203.0.113.5")).toBe("203.0.113.5 10.0.1.5");
    // Two trusted hops (the load balancer behind another of ours): the first untrusted from the right.
    expect(await ask("10.0.1.5", "1.2.3.4, 203.0.113.5, 10.0.1.9")).toBe("203.0.113.5 10.0.1.5");
    expect(await ask("::ffff:10.0.1.5", "203.0.113.5")).toBe("203.0.113.5 ::ffff:10.0.1.5");
    // A peer that is not a trusted proxy: its X-Forwarded-For is the client's to forge.
    expect(await ask("198.51.100.7", "10.0.1.9, 203.0.113.5")).toBe("198.51.100.7 198.51.100.7");
    // No header, or only trusted hops: the peer.
    expect(await ask("10.0.1.5")).toBe("10.0.1.5 10.0.1.5");
    lines.length = 0;
    const a = throttled();
    for (let i = 0; i < 3; i++) await get(a, "10.0.9.9", `nope-${i}`, TASK, { "x-forwarded-for": `198.51.100.${i}` });
    const warned = lines.filter((l) => l.includes("not in GATEWAY_TRUSTED_PROXIES"));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain("10.0.9.9");
  });
});

test("/metrics is not served on the clients' listener; the metrics app serves it with the health checks (issue 14.7)", async () => {
  const { createGatewayMetrics } = await import("../adapters/metrics.ts");
  const { createMetricsApp } = await import("./app.ts");
  const metrics = createGatewayMetrics(database.db);
  const store = createTaskStore(database.db);
  const queue = createTaskQueue(nc, REGION, 2000);
  const log = createLogger("gateway-test", { level: "silent" });
  const clients = createApp({
    config: {
      REGION,
      MAX_BODY_BYTES: 64 * 1024,
      IMAGE_MAX_BYTES: 4096,
      MAX_WAIT_SECONDS: 5,
      TASK_DEADLINE_MS: 600_000,
    },
    store,
    queue,
    watcher: createTaskWatcher(nc, REGION),
    apiKeys: createApiKeys(["client-a-key"]),
    log,
    metrics,
  });
  const res = await clients.request("/metrics");
  expect(res.status).toBe(404);
  expect(await res.text()).not.toContain("gateway_");
  await clients.request("/v1/tasks/nope", { headers: { authorization: "Bearer client-a-key" } });
  const ops = createMetricsApp({ store, queue, log, metrics });
  const scraped = await ops.request("/metrics");
  expect(scraped.status).toBe(200);
  expect(await scraped.text()).toMatch(
    /gateway_http_request_duration_seconds_count\{[^}]*method="GET",route="\/v1\/tasks\/:id",status="404"\} 1/,
  );
  expect((await ops.request("/readyz")).status).toBe(200);
  expect((await ops.request("/healthz")).status).toBe(200);
  // The clients' listener keeps its health checks (the load balancer's probe).
  expect((await clients.request("/readyz")).status).toBe(200);
});

describe("per API key quotas over HTTP, figures from Postgres (issue 14.6)", () => {
  const K = {
    flight: "quota-inflight-key",
    spend: "quota-spend-key",
    rate: "quota-rate-key",
    lane: "quota-lane-key",
    free: "quota-free-key",
  };
  let q: ReturnType<typeof createApp>;
  beforeAll(async () => {
    const { createQuotas, QuotasConfig } = await import("../domain/quotas.ts");
    const { createUsageSource } = await import("../adapters/usage.ts");
    const { clientIdOf } = await import("../domain/api-keys.ts");
    const config = QuotasConfig.parse({
      default: { maxRedrives: 1 },
      keys: {
        [clientIdOf(K.flight)]: { maxInFlight: 2 },
        [clientIdOf(K.spend)]: { dailySpend: 0.003 },
        [clientIdOf(K.rate)]: { submitsPerSecond: 1, burst: 1 },
        [clientIdOf(K.lane)]: { highLane: false },
      },
    });
    q = createApp({
      config: {
        REGION,
        MAX_BODY_BYTES: 64 * 1024,
        IMAGE_MAX_BYTES: 4096,
        MAX_WAIT_SECONDS: 5,
        TASK_DEADLINE_MS: 600_000,
      },
      store: createTaskStore(database.db),
      queue: createTaskQueue(nc, REGION, 2000),
      watcher: createTaskWatcher(nc, REGION),
      apiKeys: createApiKeys(Object.values(K)),
      log: createLogger("gateway-test", { level: "silent" }),
      quotas: createQuotas({
        config,
        prices: { turnstile: 0.001 },
        source: createUsageSource(database.db),
        refreshMs: 100,
      }),
    });
  });
  const submit = (key: string, body: unknown = turnstile, headers: Record<string, string> = {}) =>
    q.request("/v1/tasks", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  const problem = async (res: Response) => (await res.json()) as { status: number; errors: Array<{ field: string }> };
  const usage = async (key: string) =>
    (await (await q.request("/v1/usage", { headers: { authorization: `Bearer ${key}` } })).json()) as {
      clientId: string;
      inFlight: number;
      spendToday: number;
      limits: Record<string, unknown>;
    };

  test("tasks in flight: the third is 429 naming quota.maxInFlight with Retry-After, nothing stored; a finished task frees a place; an Idempotency-Key replay is still answered", async () => {
    const first = (await (await submit(K.flight, turnstile, { "idempotency-key": "q-1" })).json()) as { id: string };
    expect((await submit(K.flight)).status).toBe(202);
    const before = await counts();
    const third = await submit(K.flight);
    expect(third.status).toBe(429);
    expect(third.headers.get("retry-after")).toBe("1");
    expect((await problem(third)).errors[0]!.field).toBe("quota.maxInFlight");
    expect(await counts()).toEqual(before);
    // The same request again (a client's retry) is its task, not a refusal.
    const replay = await submit(K.flight, turnstile, { "idempotency-key": "q-1" });
    expect(replay.status).toBe(202);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect((await usage(K.flight)).inFlight).toBe(2);
    await database.sql`update tasks set state = 'completed', completed_at = now(), version = version + 1 where id = ${first.id}`;
    await Bun.sleep(150);
    expect((await submit(K.flight)).status).toBe(202);
  });

  test("daily spend: at 0.001 a task and 0.003 a day, the fourth task is 429 naming quota.dailySpend with Retry-After until 00:00 UTC; the facade answers ERROR_ZERO_BALANCE", async () => {
    for (let i = 0; i < 3; i++) expect((await submit(K.spend)).status).toBe(202);
    const res = await submit(K.spend);
    expect(res.status).toBe(429);
    const wait = Number(res.headers.get("retry-after"));
    const midnight = Math.ceil((Math.ceil(Date.now() / 86_400_000) * 86_400_000 - Date.now()) / 1000);
    expect(Math.abs(wait - midnight)).toBeLessThan(5);
    expect((await problem(res)).errors[0]!.field).toBe("quota.dailySpend");
    expect(
      await (
        await q.request(
          `/in.php?key=${K.spend}&method=turnstile&sitekey=0x4AAAAAAAC3DHQFLr1GavRN&pageurl=https://example.com/x`,
        )
      ).text(),
    ).toBe("ERROR_ZERO_BALANCE");
    const u = await usage(K.spend);
    expect(u.spendToday).toBe(0.003);
    expect(u.limits).toMatchObject({ dailySpend: 0.003 });
  });

  test("submission rate: a second task within the second is 429 naming quota.submitsPerSecond; a key without limits is not affected", async () => {
    expect((await submit(K.rate)).status).toBe(202);
    const res = await submit(K.rate);
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("1");
    expect((await problem(res)).errors[0]!.field).toBe("quota.submitsPerSecond");
    for (let i = 0; i < 3; i++) expect((await submit(K.free)).status).toBe(202);
  });

  test("the high lane is a right: 403 naming priority; normal is accepted", async () => {
    const res = await submit(K.lane, { ...turnstile, priority: "high" });
    expect(res.status).toBe(403);
    expect((await problem(res)).errors[0]!.field).toBe("priority");
    expect((await submit(K.lane, { ...turnstile, priority: "normal" })).status).toBe(202);
  });

  test("redrives per task: the second redrive of a task is 403 naming path.id, and nothing changes", async () => {
    const { id } = (await (await submit(K.free)).json()) as { id: string };
    const fail = () =>
      database.sql`update tasks set state = 'failed', error_code = 'MAX_ATTEMPTS', completed_at = now(), version = version + 1 where id = ${id}`;
    const retry = () =>
      q.request(`/v1/tasks/${id}/retry`, { method: "POST", headers: { authorization: `Bearer ${K.free}` } });
    await fail();
    expect((await retry()).status).toBe(202);
    await fail();
    const [before] = await database.sql<
      { state: string; redrives: number; version: number }[]
    >`select state, redrives, version from tasks where id = ${id}`;
    const res = await retry();
    expect(res.status).toBe(403);
    expect((await problem(res)).errors[0]!.field).toBe("path.id");
    const [after] = await database.sql<
      { state: string; redrives: number; version: number }[]
    >`select state, redrives, version from tasks where id = ${id}`;
    expect(after).toEqual(before!);
  });

  test("GET /v1/usage shows a key its own figures only (no-store); without a key 401", async () => {
    const { clientIdOf } = await import("../domain/api-keys.ts");
    const res = await q.request("/v1/usage", { headers: { authorization: `Bearer ${K.lane}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const u = (await res.json()) as { clientId: string; inFlight: number; limits: Record<string, unknown> };
    expect(u.clientId).toBe(clientIdOf(K.lane));
    expect(u.inFlight).toBe(1);
    expect(u.limits).toEqual({ maxRedrives: 1, highLane: false });
    expect((await q.request("/v1/usage")).status).toBe(401);
  });
});

test("two gateways share a key's in-flight and spend figures through Postgres (each reads at most every QUOTA_REFRESH_MS)", async () => {
  const { createQuotas, QuotasConfig } = await import("../domain/quotas.ts");
  const { createUsageSource } = await import("../adapters/usage.ts");
  const key = "quota-two-gateways-key";
  const gateway = () =>
    createApp({
      config: {
        REGION,
        MAX_BODY_BYTES: 64 * 1024,
        IMAGE_MAX_BYTES: 4096,
        MAX_WAIT_SECONDS: 5,
        TASK_DEADLINE_MS: 600_000,
      },
      store: createTaskStore(database.db),
      queue: createTaskQueue(nc, REGION, 2000),
      watcher: createTaskWatcher(nc, REGION),
      apiKeys: createApiKeys([key]),
      log: createLogger("gateway-test", { level: "silent" }),
      quotas: createQuotas({
        config: QuotasConfig.parse({ default: { maxInFlight: 3, dailySpend: 10 } }),
        prices: { turnstile: 2 },
        source: createUsageSource(database.db),
        refreshMs: 200,
      }),
    });
  const [one, two] = [gateway(), gateway()];
  const submit = (g: ReturnType<typeof createApp>) =>
    g.request("/v1/tasks", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(turnstile),
    });
  // The second gateway reads its figures first (nothing yet), then the first takes three tasks.
  expect(
    (await (await two.request("/v1/usage", { headers: { authorization: `Bearer ${key}` } })).json()) as {
      inFlight: number;
    },
  ).toMatchObject({ inFlight: 0 });
  for (let i = 0; i < 3; i++) expect((await submit(one)).status).toBe(202);
  expect((await submit(one)).status).toBe(429);
  await Bun.sleep(250);
  const res = await submit(two);
  expect(res.status).toBe(429);
  expect(((await res.json()) as { errors: Array<{ field: string }> }).errors[0]!.field).toBe("quota.maxInFlight");
  const u = (await (await two.request("/v1/usage", { headers: { authorization: `Bearer ${key}` } })).json()) as {
    inFlight: number;
    spendToday: number;
  };
  expect(u).toMatchObject({ inFlight: 3, spendToday: 6 });
  // Finished tasks leave the count; the spend stays: 6 + 2 + 2 = 10, then the cap.
  await database.sql`update tasks set state = 'completed', completed_at = now(), version = version + 1 where owner = ${(await import("../domain/api-keys.ts")).clientIdOf(key)}`;
  await Bun.sleep(250);
  expect((await submit(two)).status).toBe(202);
  expect((await submit(one)).status).toBe(202);
  await Bun.sleep(250);
  const capped = await submit(two);
  expect(capped.status).toBe(429);
  expect(((await capped.json()) as { errors: Array<{ field: string }> }).errors[0]!.field).toBe("quota.dailySpend");
});

describe("another client's key, and request limits (issue 14, untested until now)", () => {
  const as = (key: string, path: string, init: RequestInit = {}) =>
    app.request(path, {
      ...init,
      headers: { authorization: `Bearer ${key}`, ...(init.headers as Record<string, string>) },
    });

  test("DELETE, retry and the event stream of a task with another client's key are 404, and change nothing", async () => {
    const { id } = (await (await post(turnstile)).json()) as { id: string };
    await database.sql`update tasks set state = 'failed', error_code = 'MAX_ATTEMPTS', completed_at = now(), version = version + 1 where id = ${id}`;
    const [before] = await database.sql<
      { state: string; version: number; redrives: number }[]
    >`select state, version, redrives from tasks where id = ${id}`;
    const del = await as("client-b-key", `/v1/tasks/${id}`, { method: "DELETE" });
    const retry = await as("client-b-key", `/v1/tasks/${id}/retry`, { method: "POST" });
    const sse = await as("client-b-key", `/v1/tasks/${id}/events`);
    for (const r of [del, retry, sse]) {
      expect(r.status).toBe(404);
      expect(r.headers.get("content-type")).toContain("application/problem+json");
    }
    const [after] = await database.sql<
      { state: string; version: number; redrives: number }[]
    >`select state, version, redrives from tasks where id = ${id}`;
    expect(after).toEqual(before!);
    // The owner still can.
    expect((await as("client-a-key", `/v1/tasks/${id}/retry`, { method: "POST" })).status).toBe(202);
  });

  test("an Idempotency-Key used by another client is another task: no replay of the first client's task, no 422 telling it exists", async () => {
    const a = await post(turnstile, { "idempotency-key": "shared-order-7" });
    const b = await post(
      { ...turnstile, params: { ...turnstile.params, pageurl: "https://example.com/b" } },
      { "idempotency-key": "shared-order-7", authorization: "Bearer client-b-key" },
    );
    expect(a.status).toBe(202);
    expect(b.status).toBe(202);
    expect(b.headers.get("idempotent-replayed")).toBeNull();
    const [ida, idb] = [((await a.json()) as { id: string }).id, ((await b.json()) as { id: string }).id];
    expect(idb).not.toBe(ida);
    const rows = await database.sql<
      { id: string; owner: string }[]
    >`select id, owner from tasks where id in (${ida}, ${idb})`;
    expect(new Set(rows.map((r) => r.owner)).size).toBe(2);
  });

  describe("over a real listener", () => {
    let server: ReturnType<typeof Bun.serve>;
    let base: string;
    beforeAll(() => {
      server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
      base = `http://127.0.0.1:${server.port}`;
    });
    afterAll(() => server.stop(true));

    test("a chunked body (no Content-Length) beyond MAX_BODY_BYTES is 413 naming (body), and nothing is stored", async () => {
      const before = await counts();
      const chunk = new TextEncoder().encode(`{"type":"image","params":{"body":"${"A".repeat(8 * 1024)}`);
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(ctl) {
          if (sent >= 12) return ctl.close();
          sent++;
          ctl.enqueue(chunk);
        },
      });
      const res = await fetch(`${base}/v1/tasks`, {
        method: "POST",
        headers: { authorization: "Bearer client-a-key", "content-type": "application/json" },
        body,
        duplex: "half",
      } as RequestInit);
      expect(res.status).toBe(413);
      expect(((await res.json()) as { errors: Array<{ field: string }> }).errors[0]!.field).toBe("(body)");
      expect(await counts()).toEqual(before);
    });

    /**
     * A client as Python's urllib (and many HTTP libraries) is: it writes the request line, the
     * headers and the whole body, and only then reads. What it reads back (or how it failed).
     */
    async function writeAllThenRead(head: string, body: Uint8Array): Promise<string> {
      const url = new URL(base);
      const sock = connect({ host: url.hostname, port: Number(url.port) });
      sock.pause();
      const failed = new Promise<string>((resolve) => sock.once("error", (e) => resolve(`error: ${e.message}`)));
      await new Promise<void>((resolve) => sock.once("connect", () => resolve()));
      const wrote = new Promise<string>((resolve) => {
        sock.write(head);
        sock.write(body, (err) => resolve(err ? `error: ${err.message}` : "written"));
      });
      const w = await Promise.race([wrote, failed, Bun.sleep(15_000).then(() => "write timed out")]);
      if (w !== "written") {
        sock.destroy();
        return w;
      }
      const chunks: Buffer[] = [];
      sock.on("data", (d: Buffer) => chunks.push(d));
      sock.resume();
      const end = new Promise<string>((resolve) => sock.once("end", () => resolve("end")));
      await Promise.race([end, failed, Bun.sleep(5000)]);
      sock.destroy();
      return Buffer.concat(chunks).toString("latin1") || "nothing read";
    }

    test("a client that writes its whole oversized body before reading gets the 413, not a broken pipe (lingering close)", async () => {
      const before = await counts();
      const body = new Uint8Array(3 * 1024 * 1024).fill(65);
      const head = `POST /v1/tasks HTTP/1.1\r\nhost: ${new URL(base).host}\r\nauthorization: Bearer client-a-key\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
      const got = await writeAllThenRead(head, body);
      expect(got).toStartWith("HTTP/1.1 413");
      expect(got).toContain('"field":"(body)"');
      // Chunked, without a length: the same.
      const chunked = `POST /v1/tasks HTTP/1.1\r\nhost: ${new URL(base).host}\r\nauthorization: Bearer client-a-key\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`;
      const part = `${(256 * 1024).toString(16)}\r\n${"A".repeat(256 * 1024)}\r\n`;
      const chunkedBody = new TextEncoder().encode(`${part.repeat(12)}0\r\n\r\n`);
      expect(await writeAllThenRead(chunked, chunkedBody)).toStartWith("HTTP/1.1 413");
      expect(await counts()).toEqual(before);
    });

    test("an oversized request header is refused before any route runs (431), and nothing is stored", async () => {
      const before = await counts();
      const res = await fetch(`${base}/v1/tasks`, {
        method: "POST",
        headers: {
          authorization: "Bearer client-a-key",
          "content-type": "application/json",
          "x-filler": "x".repeat(64 * 1024),
        },
        body: JSON.stringify(turnstile),
      });
      expect(res.status).toBe(431);
      expect(await counts()).toEqual(before);
    });
  });
});
