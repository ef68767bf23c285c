// Peppered client ids (issue 14.8) over real Postgres and NATS: the same keys served by a gateway
// before the switch (legacy ids), during the transition (API_KEY_PEPPER + API_KEY_LEGACY_IDS) and
// after it without a rewrite of the owners (what the transition and `recovery rewrite-owners` are for).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { legacyClientId, pepperedClientId } from "@pipeline/shared/client-ids";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, ensureStreams, type NatsConnection } from "@pipeline/shared/nats";
import { clientWebhookSecret, signatureHeader, verifyWebhook } from "@pipeline/shared/webhooks";
import { createTaskQueue, createTaskWatcher } from "../adapters/nats.ts";
import { createTaskStore } from "../adapters/pg.ts";
import { createUsageSource } from "../adapters/usage.ts";
import { type ClientIdOptions, createApiKeys } from "../domain/api-keys.ts";
import { createQuotas, QuotasConfig } from "../domain/quotas.ts";
import { createApp } from "./app.ts";

const REGION = "gw";
const PEPPER = "test-pepper-0123456789abcdef0123456789";
const MASTER = "master-secret-0003";
const KA = "client-a-key-0123456789abcdef0123456789";
const KB = "client-b-key-0123456789abcdef0123456789";
const KQ = "client-q-key-0123456789abcdef0123456789";
let nats: TestNats;
let tdb: TestDatabase;
let nc: NatsConnection;
let database: Database;

type App = ReturnType<typeof createApp>;
const gateway = (ids: ClientIdOptions): App => {
  const apiKeys = createApiKeys([KA, KB, KQ], ids);
  const config = QuotasConfig.parse({ keys: { [legacyClientId(KQ)]: { maxInFlight: 3, dailySpend: 10 } } });
  return createApp({
    config: {
      REGION,
      MAX_BODY_BYTES: 64 * 1024,
      IMAGE_MAX_BYTES: 4096,
      MAX_WAIT_SECONDS: 5,
      TASK_DEADLINE_MS: 600_000,
      WEBHOOK_SECRET: MASTER,
      SSE_MAX_SECONDS: 1,
    },
    store: createTaskStore(database.db),
    queue: createTaskQueue(nc, REGION, 2000),
    watcher: createTaskWatcher(nc, REGION),
    apiKeys,
    log: createLogger("gateway-test", { level: "silent" }),
    quotas: createQuotas({
      config,
      prices: { turnstile: 1 },
      source: createUsageSource(database.db),
      refreshMs: 100,
      ownersOf: apiKeys.ownersOf,
    }),
  });
};
let before: App;
let during: App;
let after: App;

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats(), createTestDatabase("clientids")]);
  nc = await connectNats(nats.url, "gateway-test", nats.auth("admin"));
  await ensureStreams(await (await import("@nats-io/jetstream")).jetstreamManager(nc), { region: REGION });
  database = openDatabase(tdb.url, { max: 5 });
  before = gateway({});
  during = gateway({ pepper: PEPPER, legacyIds: true });
  after = gateway({ pepper: PEPPER });
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
const as = (app: App, key: string, path: string, init: RequestInit = {}) =>
  app.request(path, {
    ...init,
    headers: { authorization: `Bearer ${key}`, ...(init.headers as Record<string, string>) },
  });
const submit = async (app: App, key: string, headers: Record<string, string> = {}, body: unknown = turnstile) =>
  as(app, key, "/v1/tasks", {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
const ownerOf = async (id: string) =>
  (await database.sql<{ owner: string }[]>`select owner from tasks where id = ${id}`)[0]?.owner;
const rows = async () => (await database.sql<{ n: number }[]>`select count(*)::int as n from tasks`)[0]!.n;

describe("client ids across the switch to API_KEY_PEPPER (issue 14.8)", () => {
  test("a new task is owned by the peppered id (32 hex, not the key's sha256 prefix); the legacy gateway's by the legacy id", async () => {
    const res = await submit(during, KA);
    expect(res.status).toBe(202);
    const owner = await ownerOf(((await res.json()) as { id: string }).id);
    expect(owner).toBe(pepperedClientId(PEPPER, KA));
    expect(owner).toMatch(/^[0-9a-f]{32}$/);
    expect(owner).not.toContain(createHash("sha256").update(KA).digest("hex").slice(0, 16));
    const old = await submit(before, KA);
    expect(await ownerOf(((await old.json()) as { id: string }).id)).toBe(legacyClientId(KA));
  });

  test("ownership: a task created under the legacy id is the key's during the transition (GET, events, retry, DELETE, facade get/get2/bulk), never another key's; without API_KEY_LEGACY_IDS and before a rewrite it is lost (404)", async () => {
    const { id } = (await (await submit(before, KA)).json()) as { id: string };
    const { id: done } = (await (await submit(before, KA)).json()) as { id: string };
    await database.sql`update tasks set state = 'completed', token = 'TOKEN-L', token_expires_at = now() + interval '2 minutes', completed_at = now(), version = version + 1 where id = ${done}`;
    expect((await as(during, KA, `/v1/tasks/${id}`)).status).toBe(200);
    expect((await as(during, KB, `/v1/tasks/${id}`)).status).toBe(404);
    expect((await as(after, KA, `/v1/tasks/${id}`)).status).toBe(404);
    const sse = await as(during, KA, `/v1/tasks/${done}/events`);
    expect(sse.status).toBe(200);
    expect(await sse.text()).toContain("TOKEN-L");
    expect((await as(during, KB, `/v1/tasks/${done}/events`)).status).toBe(404);
    // The facade: res.php get, get2 and a bulk get.
    const facade = async (app: App, key: string, q: string) => (await app.request(`/res.php?key=${key}&${q}`)).text();
    expect(await facade(during, KA, `action=get&id=${id}`)).toBe("CAPCHA_NOT_READY");
    expect(await facade(during, KA, `action=get2&id=${done}`)).toBe("OK|TOKEN-L|0");
    expect(await facade(during, KA, `action=get&ids=${done},${id}`)).toBe("TOKEN-L|CAPCHA_NOT_READY");
    expect(await facade(during, KB, `action=get2&id=${done}`)).toBe("ERROR_WRONG_CAPTCHA_ID");
    expect(await facade(after, KA, `action=get2&id=${done}`)).toBe("ERROR_WRONG_CAPTCHA_ID");
    // Changes: another key changes nothing; the key itself redrives and cancels.
    await database.sql`update tasks set state = 'failed', error_code = 'MAX_ATTEMPTS', completed_at = now(), version = version + 1 where id = ${id}`;
    expect((await as(during, KB, `/v1/tasks/${id}/retry`, { method: "POST" })).status).toBe(404);
    expect((await as(after, KA, `/v1/tasks/${id}/retry`, { method: "POST" })).status).toBe(404);
    expect((await as(during, KA, `/v1/tasks/${id}/retry`, { method: "POST" })).status).toBe(202);
    expect((await as(during, KB, `/v1/tasks/${id}`, { method: "DELETE" })).status).toBe(404);
    const del = await as(during, KA, `/v1/tasks/${id}`, { method: "DELETE" });
    expect(del.status).toBe(200);
    expect(((await del.json()) as { status: string }).status).toBe("cancelled");
    // The row keeps its owner: only `recovery rewrite-owners` changes it.
    expect(await ownerOf(id)).toBe(legacyClientId(KA));
  });

  test("idempotency: a retry with the same Idempotency-Key across the switch finds the task created under the legacy id (no second task); another body is 422; another key gets its own task", async () => {
    // The switch changes the key's id, so the task id derived from (client id, Idempotency-Key) changes too.
    expect(createApiKeys([KA], { pepper: PEPPER }).clientOf(KA)).not.toBe(legacyClientId(KA));
    const first = await submit(before, KA, { "idempotency-key": "order-77" });
    const { id } = (await first.json()) as { id: string };
    const n = await rows();
    const again = await submit(during, KA, { "idempotency-key": "order-77" });
    expect(again.status).toBe(202);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(((await again.json()) as { id: string }).id).toBe(id);
    expect(await rows()).toBe(n);
    expect(
      (
        await submit(
          during,
          KA,
          { "idempotency-key": "order-77" },
          { ...turnstile, params: { ...turnstile.params, pageurl: "https://example.com/other" } },
        )
      ).status,
    ).toBe(422);
    const b = await submit(during, KB, { "idempotency-key": "order-77" });
    expect(b.status).toBe(202);
    expect(((await b.json()) as { id: string }).id).not.toBe(id);
    expect(await rows()).toBe(n + 1);
    // A key first used after the switch: its task is the new id's, and its retry that task.
    const fresh = (await (await submit(during, KA, { "idempotency-key": "order-78" })).json()) as { id: string };
    expect(await ownerOf(fresh.id)).toBe(pepperedClientId(PEPPER, KA));
    expect(((await (await submit(during, KA, { "idempotency-key": "order-78" })).json()) as { id: string }).id).toBe(
      fresh.id,
    );
    expect(await rows()).toBe(n + 2);
  });

  test("quotas and GET /v1/usage: the figures add the legacy id's rows, a QUOTAS entry under the legacy id applies, the usage shows the new id", async () => {
    for (let i = 0; i < 2; i++) expect((await submit(before, KQ)).status).toBe(202);
    const usage = async () =>
      (await (await as(during, KQ, "/v1/usage")).json()) as {
        clientId: string;
        inFlight: number;
        spendToday: number;
        limits: Record<string, unknown>;
      };
    expect(await usage()).toMatchObject({
      clientId: pepperedClientId(PEPPER, KQ),
      inFlight: 2,
      spendToday: 2,
      limits: { maxInFlight: 3, dailySpend: 10 },
    });
    expect((await submit(during, KQ)).status).toBe(202);
    const refused = await submit(during, KQ);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { errors: Array<{ field: string }> }).errors[0]!.field).toBe("quota.maxInFlight");
    await Bun.sleep(150);
    expect(await usage()).toMatchObject({ inFlight: 3, spendToday: 3 });
  });

  test("GET /v1/webhook-secret during the transition: the new id's secret, and as previous the legacy id's, so a receiver verifies callbacks of tasks under either owner", async () => {
    const r = await as(during, KA, "/v1/webhook-secret");
    expect(r.status).toBe(200);
    const s = (await r.json()) as { clientId: string; secret: string; previous: string; legacyClientId: string };
    expect(s).toEqual({
      clientId: pepperedClientId(PEPPER, KA),
      secret: clientWebhookSecret(MASTER, pepperedClientId(PEPPER, KA)),
      previous: clientWebhookSecret(MASTER, legacyClientId(KA)),
      legacyClientId: legacyClientId(KA),
    });
    // What the solvers sign with: HMAC(WEBHOOK_SECRET, "callbacks:<the task row's owner>").
    const body = '{"id":"x"}';
    const ts = Math.floor(Date.now() / 1000);
    for (const owner of [legacyClientId(KA), pepperedClientId(PEPPER, KA)]) {
      const signature = signatureHeader([clientWebhookSecret(MASTER, owner)], ts, body);
      expect(
        [s.secret, s.previous].some((secret) => verifyWebhook(secret, { timestamp: String(ts), signature }, body)),
      ).toBe(true);
    }
    const otherSig = signatureHeader([clientWebhookSecret(MASTER, legacyClientId(KB))], ts, body);
    expect(
      [s.secret, s.previous].some((secret) =>
        verifyWebhook(secret, { timestamp: String(ts), signature: otherSig }, body),
      ),
    ).toBe(false);
    // After the transition: the new id's secret only.
    const done = (await (await as(after, KA, "/v1/webhook-secret")).json()) as Record<string, string>;
    expect(done).toEqual({
      clientId: pepperedClientId(PEPPER, KA),
      secret: clientWebhookSecret(MASTER, pepperedClientId(PEPPER, KA)),
    });
  });
});
