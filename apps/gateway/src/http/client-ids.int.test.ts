// Peppered client ids (issue 14.8) over real Postgres and NATS: one client id per key. The same
// keys served by a gateway with API_KEY_PEPPER and by one without (a dev stack's unpeppered ids):
// a row owned by a key's other id is not that key's.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { pepperedClientId, unpepperedClientId } from "@pipeline/shared/client-ids";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, ensureStreams, type NatsConnection } from "@pipeline/shared/nats";
import { clientWebhookSecret } from "@pipeline/shared/webhooks";
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
  const config = QuotasConfig.parse({ keys: { [pepperedClientId(PEPPER, KQ)]: { maxInFlight: 3, dailySpend: 10 } } });
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
    }),
  });
};
let unpeppered: App;
let peppered: App;

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats(), createTestDatabase("clientids")]);
  nc = await connectNats(nats.url, "gateway-test", nats.auth("admin"));
  await ensureStreams(await (await import("@nats-io/jetstream")).jetstreamManager(nc), { region: REGION });
  database = openDatabase(tdb.url, { max: 5 });
  unpeppered = gateway({});
  peppered = gateway({ pepper: PEPPER });
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

describe("client ids with API_KEY_PEPPER (issue 14.8)", () => {
  test("a new task is owned by the peppered id (32 hex, not the key's sha256 prefix); without a pepper by the sha256 prefix", async () => {
    const res = await submit(peppered, KA);
    expect(res.status).toBe(202);
    const owner = await ownerOf(((await res.json()) as { id: string }).id);
    expect(owner).toBe(pepperedClientId(PEPPER, KA));
    expect(owner).toMatch(/^[0-9a-f]{32}$/);
    expect(owner).not.toContain(createHash("sha256").update(KA).digest("hex").slice(0, 16));
    const dev = await submit(unpeppered, KA);
    expect(await ownerOf(((await dev.json()) as { id: string }).id)).toBe(unpepperedClientId(KA));
  });

  test("ownership: one id per key: a task is its owner's (GET, events, retry, DELETE, facade get/get2/bulk), never another key's, nor the same key's under its other id (404)", async () => {
    const { id } = (await (await submit(peppered, KA)).json()) as { id: string };
    const { id: done } = (await (await submit(peppered, KA)).json()) as { id: string };
    const { id: other } = (await (await submit(unpeppered, KA)).json()) as { id: string };
    await database.sql`update tasks set state = 'completed', token = 'TOKEN-P', token_expires_at = now() + interval '2 minutes', completed_at = now(), version = version + 1 where id = ${done}`;
    expect((await as(peppered, KA, `/v1/tasks/${id}`)).status).toBe(200);
    expect((await as(peppered, KB, `/v1/tasks/${id}`)).status).toBe(404);
    expect((await as(peppered, KA, `/v1/tasks/${other}`)).status).toBe(404);
    expect((await as(unpeppered, KA, `/v1/tasks/${id}`)).status).toBe(404);
    const sse = await as(peppered, KA, `/v1/tasks/${done}/events`);
    expect(sse.status).toBe(200);
    expect(await sse.text()).toContain("TOKEN-P");
    expect((await as(peppered, KB, `/v1/tasks/${done}/events`)).status).toBe(404);
    // The facade: res.php get, get2 and a bulk get.
    const facade = async (app: App, key: string, q: string) => (await app.request(`/res.php?key=${key}&${q}`)).text();
    expect(await facade(peppered, KA, `action=get&id=${id}`)).toBe("CAPCHA_NOT_READY");
    expect(await facade(peppered, KA, `action=get2&id=${done}`)).toBe("OK|TOKEN-P|0");
    expect(await facade(peppered, KA, `action=get&ids=${done},${id}`)).toBe("TOKEN-P|CAPCHA_NOT_READY");
    expect(await facade(peppered, KB, `action=get2&id=${done}`)).toBe("ERROR_WRONG_CAPTCHA_ID");
    expect(await facade(peppered, KA, `action=get&id=${other}`)).toBe("ERROR_WRONG_CAPTCHA_ID");
    // Changes: another key (or the key's other id) changes nothing; the key itself redrives and cancels.
    await database.sql`update tasks set state = 'failed', error_code = 'MAX_ATTEMPTS', completed_at = now(), version = version + 1 where id in (${id}, ${other})`;
    expect((await as(peppered, KB, `/v1/tasks/${id}/retry`, { method: "POST" })).status).toBe(404);
    expect((await as(peppered, KA, `/v1/tasks/${other}/retry`, { method: "POST" })).status).toBe(404);
    expect((await as(peppered, KA, `/v1/tasks/${id}/retry`, { method: "POST" })).status).toBe(202);
    expect((await as(peppered, KB, `/v1/tasks/${id}`, { method: "DELETE" })).status).toBe(404);
    expect((await as(peppered, KA, `/v1/tasks/${other}`, { method: "DELETE" })).status).toBe(404);
    const del = await as(peppered, KA, `/v1/tasks/${id}`, { method: "DELETE" });
    expect(del.status).toBe(200);
    expect(((await del.json()) as { status: string }).status).toBe("cancelled");
    expect(await ownerOf(other)).toBe(unpepperedClientId(KA));
  });

  test("idempotency: a retry with the same Idempotency-Key finds the key's task (no second task); another body is 422; another key, or the key under its other id, gets its own task", async () => {
    // The task id is derived from (client id, Idempotency-Key): another id, another task.
    expect(createApiKeys([KA], { pepper: PEPPER }).clientOf(KA)).not.toBe(unpepperedClientId(KA));
    const first = await submit(peppered, KA, { "idempotency-key": "order-77" });
    const { id } = (await first.json()) as { id: string };
    expect(await ownerOf(id)).toBe(pepperedClientId(PEPPER, KA));
    const n = await rows();
    const again = await submit(peppered, KA, { "idempotency-key": "order-77" });
    expect(again.status).toBe(202);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(((await again.json()) as { id: string }).id).toBe(id);
    expect(await rows()).toBe(n);
    expect(
      (
        await submit(
          peppered,
          KA,
          { "idempotency-key": "order-77" },
          { ...turnstile, params: { ...turnstile.params, pageurl: "https://example.com/other" } },
        )
      ).status,
    ).toBe(422);
    const b = await submit(peppered, KB, { "idempotency-key": "order-77" });
    expect(b.status).toBe(202);
    expect(((await b.json()) as { id: string }).id).not.toBe(id);
    const dev = await submit(unpeppered, KA, { "idempotency-key": "order-77" });
    expect(dev.status).toBe(202);
    expect(dev.headers.get("idempotent-replayed")).toBeNull();
    expect(((await dev.json()) as { id: string }).id).not.toBe(id);
    expect(await rows()).toBe(n + 2);
  });

  test("quotas and GET /v1/usage: a QUOTAS entry under the peppered id applies, the figures count that id's rows only, the usage shows it", async () => {
    // Rows under the key's unpeppered id are another client's figures.
    for (let i = 0; i < 2; i++) expect((await submit(unpeppered, KQ)).status).toBe(202);
    const usage = async () =>
      (await (await as(peppered, KQ, "/v1/usage")).json()) as {
        clientId: string;
        inFlight: number;
        spendToday: number;
        limits: Record<string, unknown>;
      };
    expect(await usage()).toMatchObject({
      clientId: pepperedClientId(PEPPER, KQ),
      inFlight: 0,
      spendToday: 0,
      limits: { maxInFlight: 3, dailySpend: 10 },
    });
    for (let i = 0; i < 3; i++) expect((await submit(peppered, KQ)).status).toBe(202);
    const refused = await submit(peppered, KQ);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { errors: Array<{ field: string }> }).errors[0]!.field).toBe("quota.maxInFlight");
    await Bun.sleep(150);
    expect(await usage()).toMatchObject({ inFlight: 3, spendToday: 3 });
  });

  test("GET /v1/webhook-secret: the peppered id's secret, and no previous one (no rotation)", async () => {
    const r = await as(peppered, KA, "/v1/webhook-secret");
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({
      clientId: pepperedClientId(PEPPER, KA),
      secret: clientWebhookSecret(MASTER, pepperedClientId(PEPPER, KA)),
    });
  });
});
