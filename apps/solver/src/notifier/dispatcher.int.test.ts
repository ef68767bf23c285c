// The callback dispatcher against a real Postgres: the SSRF policy at send time (DNS answers
// checked, the checked address connected to), retries from webhook_deliveries with limits by
// count and age, per-tenant and per-host in-flight caps, and leases a dead solver leaves behind.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { createTestDatabase, eventually, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, openDatabase, tasks, webhookDeliveries } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { type CallbackPolicy, callbackHostKey, type ResolvedAddress } from "@pipeline/shared/net";
import { clientWebhookSecret, verifyWebhook, WEBHOOK_HEADERS } from "@pipeline/shared/webhooks";
import { type CallbackRequest, type PostCallback, pinnedPost, type Resolve } from "../adapters/callback-http.ts";
import { createDeliveryStore, type DeliveryStore } from "../adapters/deliveries.ts";
import { type AttemptResult, createDispatcher, type DeliveryOutcome, type DispatcherDeps } from "./dispatcher.ts";

const SECRET = "dispatcher-test-secret-0001";
const STRICT: CallbackPolicy = { allowHttp: false, allowPrivate: false };
const DEV: CallbackPolicy = { allowHttp: true, allowPrivate: true };

let tdb: TestDatabase;
let database: Database;
/** The store's own connection: the solver's role (issue 34), not the admin's. */
let solver: Database;
let store: DeliveryStore;
beforeAll(async () => {
  tdb = await createTestDatabase("dispatch");
  database = openDatabase(tdb.url, { max: 6 });
  solver = openDatabase(tdb.appUrls.solver, { max: 6 });
  store = createDeliveryStore(solver.db);
});
afterAll(async () => {
  await solver.close();
  await database.close();
  await tdb.drop();
});
beforeEach(async () => {
  await database.sql`delete from webhook_deliveries`;
});

/** A completed task with a callback, and its delivery recorded as the notifier records it. */
async function completedTask(callbackUrl: string, owner = "tenant-a"): Promise<{ taskId: string; deliveryId: string }> {
  const taskId = randomUUID();
  await database.db.insert(tasks).values({
    id: taskId,
    owner,
    requestHash: "h",
    region: "dp",
    type: "turnstile",
    priority: "normal",
    params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com" },
    state: "completed",
    token: "tok-tok-tok",
    tokenExpiresAt: new Date(Date.now() + 120_000),
    completedAt: new Date(),
    callbackUrl,
  });
  const deliveryId = `${taskId}:completed:0`;
  await store.enqueue({ deliveryId, taskId, state: "completed", owner, host: callbackHostKey(callbackUrl) });
  return { taskId, deliveryId };
}

const delivery = async (id: string) => (await database.db.select().from(webhookDeliveries).where(eqId(id)))[0]!;

import { eq } from "drizzle-orm";

const eqId = (id: string) => eq(webhookDeliveries.deliveryId, id);

/** A logger whose lines the test reads. */
function capturedLog() {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { log: createLogger("dispatcher-test", { level: "debug", destination }), lines };
}

function dispatcher(o: Partial<DispatcherDeps> & { post: PostCallback; resolve?: Resolve }) {
  const counted = { attempts: [] as AttemptResult[], outcomes: [] as DeliveryOutcome[] };
  const { log, lines } = capturedLog();
  const d = createDispatcher({
    store,
    secrets: [SECRET],
    policy: STRICT,
    resolve: o.resolve ?? (async () => [{ address: "93.184.216.34", family: 4 }]),
    timeoutMs: 1000,
    retryBaseMs: 10,
    retryMaxMs: 20,
    maxAttempts: 30,
    maxAgeMs: 3600_000,
    concurrency: 50,
    tenantMaxInFlight: 10,
    hostMaxInFlight: 20,
    pollMs: 50,
    workerId: `w-${randomUUID().slice(0, 8)}`,
    log,
    metrics: { attempt: (r) => counted.attempts.push(r), outcome: (x) => counted.outcomes.push(x) },
    ...o,
  });
  d.start();
  return { d, counted, lines };
}

const sent = () => {
  const calls: CallbackRequest[] = [];
  const post: PostCallback = async (req) => {
    calls.push(req);
    return { status: 200 };
  };
  return { calls, post };
};

describe("the SSRF policy at send time", () => {
  test("a host name that resolves to 127.0.0.1 is refused: not sent, not retried, recorded and logged", async () => {
    const { calls, post } = sent();
    const resolved: string[] = [];
    const resolve: Resolve = async (host) => {
      resolved.push(host);
      return [{ address: "127.0.0.1", family: 4 }];
    };
    const { deliveryId, taskId } = await completedTask("https://hooks.rebind.example/cb?token=s3cret");
    const { d, counted, lines } = dispatcher({ post, resolve });
    try {
      await eventually(async () => (await delivery(deliveryId)).status === "refused", 5000);
      await Bun.sleep(200); // nothing more happens to it
    } finally {
      await d.stop();
    }
    expect(resolved).toEqual(["hooks.rebind.example"]);
    expect(calls).toEqual([]);
    const row = await delivery(deliveryId);
    expect(row).toMatchObject({
      status: "refused",
      attempts: 0,
      lastError: "the host name resolves to a loopback address (127.0.0.1)",
      leaseUntil: null,
    });
    expect(row.failedAt).toBeInstanceOf(Date);
    expect(counted.outcomes).toEqual(["refused"]);
    const warn = lines.find((l) => l.msg === "callback refused by the SSRF policy; not sent, not retried");
    expect(warn).toMatchObject({ level: 40, taskId, deliveryId });
    expect(JSON.stringify(lines)).not.toContain("s3cret");
  });

  test("one private answer among public ones refuses the host (DNS rebinding)", async () => {
    const { calls, post } = sent();
    const resolve: Resolve = async () => [
      { address: "93.184.216.34", family: 4 },
      { address: "::ffff:169.254.169.254", family: 6 },
    ];
    const { deliveryId } = await completedTask("https://hooks.mixed.example/cb");
    const { d } = dispatcher({ post, resolve });
    try {
      await eventually(async () => (await delivery(deliveryId)).status === "refused", 5000);
    } finally {
      await d.stop();
    }
    expect(calls).toEqual([]);
    expect((await delivery(deliveryId)).lastError).toContain("link-local");
  });

  test("a URL stored before the gateway checked it (or replayed from EVENTS) is refused without a DNS lookup", async () => {
    const { calls, post } = sent();
    let lookups = 0;
    const resolve: Resolve = async () => {
      lookups++;
      return [{ address: "93.184.216.34", family: 4 }];
    };
    const a = await completedTask("https://0x7f000001/cb");
    const b = await completedTask("https://localhost./cb");
    const c = await completedTask("http://hooks.example.com/cb");
    const { d, counted } = dispatcher({ post, resolve });
    try {
      await eventually(
        async () =>
          (await Promise.all([a, b, c].map((x) => delivery(x.deliveryId)))).every((r) => r.status === "refused"),
        5000,
      );
    } finally {
      await d.stop();
    }
    expect(calls).toEqual([]);
    expect(lookups).toBe(0);
    expect(counted.outcomes).toEqual(["refused", "refused", "refused"]);
    expect((await delivery(a.deliveryId)).lastError).toBe(
      "callbackUrl must not point to a loopback address (127.0.0.1)",
    );
  });

  test("a public answer is what the request is pinned to, with the host name kept in the URL, and the POST is signed", async () => {
    const { calls, post } = sent();
    const resolve: Resolve = async () => [
      { address: "2606:4700::1111", family: 6 },
      { address: "93.184.216.34", family: 4 },
    ];
    const { deliveryId } = await completedTask("https://hooks.public.example/cb");
    const { d, counted } = dispatcher({ post, resolve });
    try {
      await eventually(async () => (await delivery(deliveryId)).status === "delivered", 5000);
    } finally {
      await d.stop();
    }
    expect(calls.length).toBe(1);
    expect(calls[0]!).toMatchObject({ address: "2606:4700::1111", family: 6 });
    expect(calls[0]!.url.hostname).toBe("hooks.public.example");
    expect(calls[0]!.headers[WEBHOOK_HEADERS.delivery]).toBe(deliveryId);
    // Signed with the owner's own secret (derived from the master), which no other tenant holds.
    const sig = {
      timestamp: calls[0]!.headers[WEBHOOK_HEADERS.timestamp]!,
      signature: calls[0]!.headers[WEBHOOK_HEADERS.signature]!,
    };
    expect(verifyWebhook(clientWebhookSecret(SECRET, "tenant-a"), sig, calls[0]!.body)).toBe(true);
    expect(verifyWebhook(clientWebhookSecret(SECRET, "tenant-b"), sig, calls[0]!.body)).toBe(false);
    expect(verifyWebhook(SECRET, sig, calls[0]!.body)).toBe(false);
    expect(counted).toEqual({ attempts: ["delivered"], outcomes: ["delivered"] });
  });

  test("during a master-secret rotation each callback carries a signature for the new and the previous secret", async () => {
    const { calls, post } = sent();
    const { deliveryId } = await completedTask("https://hooks.public.example/rotation");
    const { d } = dispatcher({ post, secrets: ["dispatcher-test-secret-0002", SECRET] });
    try {
      await eventually(async () => (await delivery(deliveryId)).status === "delivered", 5000);
    } finally {
      await d.stop();
    }
    const sig = {
      timestamp: calls[0]!.headers[WEBHOOK_HEADERS.timestamp]!,
      signature: calls[0]!.headers[WEBHOOK_HEADERS.signature]!,
    };
    expect(sig.signature.split(",")).toHaveLength(2);
    expect(verifyWebhook(clientWebhookSecret("dispatcher-test-secret-0002", "tenant-a"), sig, calls[0]!.body)).toBe(
      true,
    );
    expect(verifyWebhook(clientWebhookSecret(SECRET, "tenant-a"), sig, calls[0]!.body)).toBe(true);
  });

  test("a refused connection to the first checked answer falls back to the next one", async () => {
    const tried: string[] = [];
    const post: PostCallback = async (req) => {
      tried.push(req.address);
      if (req.address === "2606:4700::1111")
        throw Object.assign(new Error("connect ENETUNREACH"), { code: "ENETUNREACH" });
      return { status: 204 };
    };
    const { deliveryId } = await completedTask("https://hooks.dual-stack.example/cb");
    const { d } = dispatcher({
      post,
      resolve: async () => [
        { address: "2606:4700::1111", family: 6 },
        { address: "93.184.216.34", family: 4 },
      ],
    });
    try {
      await eventually(async () => (await delivery(deliveryId)).status === "delivered", 5000);
    } finally {
      await d.stop();
    }
    expect(tried).toEqual(["2606:4700::1111", "93.184.216.34"]);
  });

  test("with WEBHOOK_ALLOW_PRIVATE (dev, tests) a name resolving to 127.0.0.1 is sent", async () => {
    const { calls, post } = sent();
    const { deliveryId } = await completedTask("http://hooks.dev.example:8123/cb");
    const { d } = dispatcher({ post, policy: DEV, resolve: async () => [{ address: "127.0.0.1", family: 4 }] });
    try {
      await eventually(async () => (await delivery(deliveryId)).status === "delivered", 5000);
    } finally {
      await d.stop();
    }
    expect(calls.map((c) => c.address)).toEqual(["127.0.0.1"]);
  });
});

describe("the pinned HTTP client connects to the checked address, whatever DNS would answer", () => {
  test("http: a name that does not resolve at all reaches the pinned 127.0.0.1, Host header kept", async () => {
    const seen: Array<{ host: string | null; body: string }> = [];
    const server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (req) => (seen.push({ host: req.headers.get("host"), body: await req.text() }), new Response("ok")),
    });
    try {
      const r = await pinnedPost()({
        url: new URL(`http://never-resolves.invalid:${server.port}/hook`),
        address: "127.0.0.1",
        family: 4,
        headers: { "content-type": "application/json" },
        body: '{"a":1}',
        timeoutMs: 2000,
      });
      expect(r.status).toBe(200);
      expect(seen).toEqual([{ host: `never-resolves.invalid:${server.port}`, body: '{"a":1}' }]);
    } finally {
      server.stop(true);
    }
  });

  const openssl = spawnSync("openssl", ["version"]).status === 0;
  test.skipIf(!openssl)(
    "https: pinned too, and the certificate is still checked against the URL's host name",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "pinned-tls-"));
      const gen = spawnSync(
        "openssl",
        [
          "req",
          "-x509",
          "-newkey",
          "ec",
          "-pkeyopt",
          "ec_paramgen_curve:prime256v1",
          "-nodes",
          "-keyout",
          join(dir, "key.pem"),
          "-out",
          join(dir, "cert.pem"),
          "-days",
          "1",
          "-subj",
          "/CN=hooks.test",
          "-addext",
          "subjectAltName=DNS:hooks.test",
        ],
        { encoding: "utf8" },
      );
      expect(gen.status).toBe(0);
      const cert = readFileSync(join(dir, "cert.pem"), "utf8");
      const server = Bun.serve({
        hostname: "127.0.0.1",
        port: 0,
        tls: { cert, key: readFileSync(join(dir, "key.pem"), "utf8") },
        fetch: (req) => new Response(req.headers.get("host")),
      });
      try {
        const post = pinnedPost({ ca: cert });
        const req = (host: string) => ({
          url: new URL(`https://${host}:${server.port}/hook`),
          address: "127.0.0.1",
          family: 4 as const,
          headers: {},
          body: "{}",
          timeoutMs: 3000,
        });
        expect((await post(req("hooks.test"))).status).toBe(200);
        await expect(post(req("other.test"))).rejects.toThrow(/altnames|certificate|hostname/i);
      } finally {
        server.stop(true);
      }
    },
  );

  test("a closed port is a connection error with its code (the dispatcher then tries the next address)", async () => {
    const closed = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
    const port = closed.port;
    closed.stop(true);
    const err = await pinnedPost()({
      url: new URL(`http://closed.invalid:${port}/`),
      address: "127.0.0.1",
      family: 4,
      headers: {},
      body: "{}",
      timeoutMs: 2000,
    }).then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
    expect(err?.code).toBe("ECONNREFUSED");
  });

  test("a receiver that never answers is cut at the timeout", async () => {
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Promise<Response>(() => {}) });
    try {
      const t0 = Date.now();
      await expect(
        pinnedPost()({
          url: new URL(`http://slow.invalid:${server.port}/`),
          address: "127.0.0.1",
          family: 4,
          headers: {},
          body: "{}",
          timeoutMs: 300,
        }),
      ).rejects.toThrow(/timed out/);
      expect(Date.now() - t0).toBeLessThan(2000);
    } finally {
      server.stop(true);
    }
  });
});

describe("retries from webhook_deliveries", () => {
  test("a receiver that keeps refusing is retried with backoff, then given up at the attempt limit: failed, counted, logged", async () => {
    let n = 0;
    const post: PostCallback = async () => (n++, { status: 500 });
    const { deliveryId, taskId } = await completedTask("https://hooks.refuses.example/cb");
    const { d, counted, lines } = dispatcher({ post, maxAttempts: 4 });
    try {
      await eventually(async () => (await delivery(deliveryId)).status === "failed", 5000);
      await Bun.sleep(300);
    } finally {
      await d.stop();
    }
    expect(n).toBe(4);
    expect(await delivery(deliveryId)).toMatchObject({
      status: "failed",
      attempts: 4,
      lastStatus: 500,
      lastError: "HTTP 500",
      deliveredAt: null,
    });
    expect(counted.attempts).toEqual(["http_error", "http_error", "http_error", "http_error"]);
    expect(counted.outcomes).toEqual(["failed"]);
    expect(lines.find((l) => l.msg === "callback given up: retry limit reached")).toMatchObject({
      level: 40,
      taskId,
      deliveryId,
      attempts: 4,
    });
  });

  test("a delivery older than the age limit is given up at its next failure", async () => {
    let n = 0;
    const post: PostCallback = async () => {
      n++;
      throw Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
    };
    const { deliveryId } = await completedTask("https://hooks.down.example/cb");
    await database.sql`update webhook_deliveries set created_at = now() - interval '2 hours' where delivery_id = ${deliveryId}`;
    const { d, counted } = dispatcher({ post, maxAgeMs: 3600_000 });
    try {
      await eventually(async () => (await delivery(deliveryId)).status === "failed", 5000);
    } finally {
      await d.stop();
    }
    expect(n).toBe(1);
    expect(await delivery(deliveryId)).toMatchObject({
      attempts: 1,
      lastStatus: null,
      lastError: "ECONNREFUSED: connect ECONNREFUSED",
    });
    expect(counted).toEqual({ attempts: ["unreachable"], outcomes: ["failed"] });
  });

  test("acknowledged once, never sent again; a delivery of a redriven task is superseded, not sent", async () => {
    const { calls, post } = sent();
    const done = await completedTask("https://hooks.once.example/cb");
    const redriven = await completedTask("https://hooks.once.example/cb");
    await database.sql`update tasks set state = 'queued', redrives = 1, token = null where id = ${redriven.taskId}`;
    const { d, counted } = dispatcher({ post });
    try {
      await eventually(
        async () =>
          (await delivery(done.deliveryId)).status === "delivered" &&
          (await delivery(redriven.deliveryId)).status === "superseded",
        5000,
      );
      await store.enqueue({
        deliveryId: done.deliveryId,
        taskId: done.taskId,
        state: "completed",
        owner: "tenant-a",
        host: "x",
      }); // the event seen again
      d.kick();
      await Bun.sleep(300);
    } finally {
      await d.stop();
    }
    expect(calls.map((c) => c.headers[WEBHOOK_HEADERS.delivery])).toEqual([done.deliveryId]);
    expect(counted.outcomes.sort()).toEqual(["delivered", "superseded"]);
  });

  test("a lease left by a killed solver holds its delivery until it expires, then another dispatcher sends it, same delivery id", async () => {
    const { calls, post } = sent();
    const { deliveryId } = await completedTask("https://hooks.crash.example/cb");
    // What a solver killed mid-attempt leaves: the row leased to it, no outcome written.
    await database.sql`update webhook_deliveries set lease_owner = 'dead-solver:1', lease_until = now() + interval '1500 milliseconds' where delivery_id = ${deliveryId}`;
    const t0 = Date.now();
    const { d } = dispatcher({ post });
    try {
      await Bun.sleep(700);
      expect(calls).toEqual([]);
      await eventually(async () => (await delivery(deliveryId)).status === "delivered", 5000);
    } finally {
      await d.stop();
    }
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
    expect(calls.map((c) => c.headers[WEBHOOK_HEADERS.delivery])).toEqual([deliveryId]);
  });

  test("an attempt that outlives its lease cannot overwrite the next claim's outcome", async () => {
    const { deliveryId } = await completedTask("https://hooks.late.example/cb");
    const [first] = await store.claim({ limit: 1, tenantCap: 10, hostCap: 10, leaseMs: 1, token: "a:1" });
    await Bun.sleep(20);
    const [second] = await store.claim({ limit: 1, tenantCap: 10, hostCap: 10, leaseMs: 60_000, token: "b:1" });
    expect(second?.deliveryId).toBe(deliveryId);
    expect(
      await store.retry(first!, { status: 500, error: "HTTP 500", delayMs: 10, maxAttempts: 30, maxAgeMs: 3600_000 }),
    ).toBeUndefined();
    expect(await delivery(deliveryId)).toMatchObject({ leaseOwner: "b:1", attempts: 0 });
  });
});

describe("in-flight caps", () => {
  /** A receiver per host: `slow` hosts hold every request until released. */
  function receivers(slowHosts: string[]) {
    const inFlight = new Map<string, number>();
    const max = new Map<string, number>();
    const deliveredAt = new Map<string, number>();
    const waiting: Array<() => void> = [];
    const post: PostCallback = async (req) => {
      const host = req.url.hostname;
      inFlight.set(host, (inFlight.get(host) ?? 0) + 1);
      max.set(host, Math.max(max.get(host) ?? 0, inFlight.get(host)!));
      try {
        if (slowHosts.includes(host)) {
          await new Promise<void>((r) => waiting.push(r));
          return { status: 500 };
        }
        deliveredAt.set(req.headers[WEBHOOK_HEADERS.delivery]!, Date.now());
        return { status: 200 };
      } finally {
        inFlight.set(host, inFlight.get(host)! - 1);
      }
    };
    return { post, max, deliveredAt, release: () => waiting.splice(0).forEach((r) => r()) };
  }

  test("one tenant's hanging receivers hold at most its cap; another tenant's callback goes at once", async () => {
    const rx = receivers(["hooks.tenant-a.example"]);
    for (let i = 0; i < 12; i++) await completedTask("https://hooks.tenant-a.example/cb", "tenant-a");
    const { d } = dispatcher({ post: rx.post, concurrency: 8, tenantMaxInFlight: 5 });
    try {
      await eventually(() => rx.max.get("hooks.tenant-a.example") === 5, 5000);
      const t0 = Date.now();
      const b = await completedTask("https://hooks.tenant-b.example/cb", "tenant-b");
      d.kick();
      await eventually(() => rx.deliveredAt.has(b.deliveryId), 5000);
      expect(rx.deliveredAt.get(b.deliveryId)! - t0).toBeLessThan(1000);
      expect(rx.max.get("hooks.tenant-a.example")).toBe(5);
      const leased = await database.sql<
        { n: number }[]
      >`select count(*)::int as n from webhook_deliveries where owner = 'tenant-a' and lease_until > now()`;
      expect(leased[0]!.n).toBe(5);
    } finally {
      rx.release();
      const stopping = d.stop();
      for (let i = 0; i < 20; i++) {
        rx.release();
        await Bun.sleep(20);
      }
      await stopping;
    }
  });

  test("the per-host cap holds across tenants", async () => {
    const rx = receivers(["hooks.shared.example"]);
    for (let i = 0; i < 6; i++) await completedTask("https://hooks.shared.example/cb", `tenant-${i % 3}`);
    const { d } = dispatcher({ post: rx.post, concurrency: 20, tenantMaxInFlight: 10, hostMaxInFlight: 3 });
    try {
      await eventually(() => rx.max.get("hooks.shared.example") === 3, 5000);
      await Bun.sleep(300);
      expect(rx.max.get("hooks.shared.example")).toBe(3);
    } finally {
      const stopping = d.stop();
      for (let i = 0; i < 20; i++) {
        rx.release();
        await Bun.sleep(20);
      }
      await stopping;
    }
  });
});
