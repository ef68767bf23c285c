import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type JetStreamManager, jetstreamManager } from "@nats-io/jetstream";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, ensureStreams, type NatsConnection } from "@pipeline/shared/nats";
import { provisionRegion } from "@pipeline/shared/provision";
import type { TaskView } from "@pipeline/shared/schemas";
import { streams } from "@pipeline/shared/subjects";
import { createTaskQueue, createTaskWatcher } from "../../adapters/nats.ts";
import { createTaskStore } from "../../adapters/pg.ts";
import { createReportStore } from "../../adapters/reports.ts";
import { createApiKeys } from "../../domain/api-keys.ts";
import { FACADE_BALANCE } from "../../domain/twocaptcha/res-request.ts";
import { createApp } from "../app.ts";

const REGION = "facade";
const KEY = "client-a-key";
const OTHER_KEY = "client-b-key";
const IMAGE_MAX_BYTES = 4096;
const MAX_BODY_BYTES = 64 * 1024;
let nats: TestNats;
let tdb: TestDatabase;
let nc: NatsConnection;
let jsm: JetStreamManager;
let database: Database;
let app: ReturnType<typeof createApp>;

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats(), createTestDatabase("facade")]);
  nc = await connectNats(nats.url, "facade-test", nats.auth("admin"));
  jsm = await jetstreamManager(nc);
  // The region's topology as the recovery service makes it (BODIES too: the gateway never creates it).
  await provisionRegion(nc, { region: REGION });
  database = openDatabase(tdb.url, { max: 5 });
  app = createApp({
    config: { REGION, MAX_BODY_BYTES, IMAGE_MAX_BYTES, MAX_WAIT_SECONDS: 5, TASK_DEADLINE_MS: 600_000 },
    store: createTaskStore(database.db),
    reports: createReportStore(database.db),
    queue: createTaskQueue(nc, REGION, 1000),
    watcher: createTaskWatcher(nc, REGION),
    apiKeys: createApiKeys([KEY, OTHER_KEY]),
    log: createLogger("facade-test", { level: "silent" }),
  });
});
afterAll(async () => {
  await nc.close();
  await database.close();
  await Promise.all([nats.dispose(), tdb.drop()]);
});

interface Reply {
  status: number;
  body: string;
  contentType: string | null;
  headers: Headers;
}
const toReply = async (res: Response): Promise<Reply> => ({
  status: res.status,
  body: await res.text(),
  contentType: res.headers.get("content-type"),
  headers: res.headers,
});
const get = async (path: string, params: Record<string, string>) =>
  toReply(await app.request(`${path}?${new URLSearchParams(params)}`));
const post = async (
  path: string,
  body: URLSearchParams | FormData | Record<string, unknown> | string,
  headers: Record<string, string> = {},
) => {
  const init: RequestInit =
    body instanceof URLSearchParams || body instanceof FormData
      ? { method: "POST", body, headers }
      : {
          method: "POST",
          body: typeof body === "string" ? body : JSON.stringify(body),
          headers: { "content-type": "application/json", ...headers },
        };
  return toReply(await app.request(path, init));
};
const counts = async () => {
  const [{ n }] = (await database.sql`select count(*)::int as n from tasks`) as unknown as [{ n: number }];
  const info = await jsm.streams.info(streams.tasks(REGION));
  return { rows: n, messages: info.state.messages };
};
const view = async (id: string, key = KEY) => {
  const res = await app.request(`/v1/tasks/${id}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as TaskView };
};

const PLAIN = "text/plain; charset=utf-8";
const JSON_CT = "application/json";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const SITEKEY = "6LfD3PIbAAAAAJs_eEHvoOl75_83eXSqpPSRFJ_u";
const V2 = { key: KEY, method: "userrecaptcha", googlekey: SITEKEY, pageurl: "https://example.com/login" };
const TURNSTILE = {
  key: KEY,
  method: "turnstile",
  sitekey: "0x4AAAAAAAC3DHQFLr1GavRN",
  pageurl: "https://example.com/signup",
};
const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=",
  "base64",
);

/** Submits through in.php (plain GET) and returns the task id. */
async function submit(params: Record<string, string> = V2): Promise<string> {
  const r = await get("/in.php", params);
  const m = /^OK\|(.+)$/.exec(r.body);
  if (!m) throw new Error(`not accepted: ${r.body}`);
  return m[1]!;
}
type RowPatch = {
  state: string;
  token?: string | null;
  userAgent?: string | null;
  expiresInMs?: number | null;
  errorCode?: string | null;
};
/** Moves a row to a state as the solver would (the facade only reads). */
async function setRow(id: string, p: RowPatch) {
  const expires =
    p.expiresInMs === undefined || p.expiresInMs === null ? null : new Date(Date.now() + p.expiresInMs).toISOString();
  await database.sql`update tasks set state = ${p.state}, token = ${p.token ?? null}, user_agent = ${p.userAgent ?? null}, token_expires_at = ${expires}::timestamptz,
    error_code = ${p.errorCode ?? null}, completed_at = case when ${p.state} in ('completed','failed','cancelled') then now() else null end, version = version + 1 where id = ${id}`;
}

describe("in.php accepts tasks through submitTask", () => {
  test("plain GET answers exactly OK|<task id> as text/plain; the row and the message exist; the task shows in /v1/tasks/:id", async () => {
    const before = await counts();
    const r = await get("/in.php", V2);
    expect(r.status).toBe(200);
    expect(r.contentType).toBe(PLAIN);
    expect(r.body).toMatch(/^OK\|/);
    const id = r.body.slice(3);
    expect(id).toMatch(UUID);
    expect(r.body).toBe(`OK|${id}`);
    expect(await counts()).toEqual({ rows: before.rows + 1, messages: before.messages + 1 });
    const v = await view(id);
    expect(v.status).toBe(200);
    expect(v.body).toMatchObject({ id, type: "recaptcha_v2", status: "queued" });
    const [row] = await database.sql<
      { params: unknown; priority: string }[]
    >`select params, priority from tasks where id = ${id}`;
    expect(row).toEqual({ params: { sitekey: SITEKEY, pageurl: V2.pageurl }, priority: "normal" });
    expect((await view(id, OTHER_KEY)).status).toBe(404);
  });

  test('json=1 answers exactly {"status":1,"request":"<task id>"} as application/json', async () => {
    const r = await get("/in.php", { ...V2, json: "1" });
    expect(r.contentType).toBe(JSON_CT);
    const id = (JSON.parse(r.body) as { request: string }).request;
    expect(id).toMatch(UUID);
    expect(r.body).toBe(`{"status":1,"request":"${id}"}`);
  });

  test("urlencoded POST, multipart file (method=post) and a JSON body with numbers (as the official JS client sends) are accepted", async () => {
    const before = await counts();
    const form = await post("/in.php", new URLSearchParams({ ...TURNSTILE, action: "login", data: "cd-1" }));
    expect(form.body).toMatch(/^OK\|/);
    const multipart = new FormData();
    for (const [k, v] of Object.entries({ key: KEY, method: "post", numeric: "1", json: "1" })) multipart.append(k, v);
    multipart.append("file", new Blob([PNG], { type: "image/png" }), "captcha.png");
    const file = await post("/in.php", multipart);
    expect(file.body).toMatch(/^\{"status":1,"request":"[0-9a-f-]{36}"\}$/);
    const json = await post("/in.php", {
      key: KEY,
      json: 1,
      header_acao: 1,
      soft_id: 4580,
      method: "base64",
      body: PNG.toString("base64"),
      numeric: 1,
      min_len: 0,
    });
    expect(json.body).toMatch(/^\{"status":1,"request":"[0-9a-f-]{36}"\}$/);
    expect(await counts()).toEqual({ rows: before.rows + 3, messages: before.messages + 3 });

    const [ts] = await database.sql<
      { type: string; params: unknown }[]
    >`select type, params from tasks where id = ${form.body.slice(3)}`;
    expect(ts).toEqual({
      type: "turnstile",
      params: { sitekey: TURNSTILE.sitekey, pageurl: TURNSTILE.pageurl, action: "login", cdata: "cd-1" },
    });
    for (const body of [file.body, json.body]) {
      const id = (JSON.parse(body) as { request: string }).request;
      const [img] = await database.sql<
        { type: string; params: unknown }[]
      >`select type, params from tasks where id = ${id}`;
      expect(img).toEqual({ type: "image", params: { body: PNG.toString("base64"), numeric: 1 } });
    }
  });

  test("header_acao=1 adds Access-Control-Allow-Origin: *; without it there is none", async () => {
    expect((await get("/in.php", { ...V2, header_acao: "1" })).headers.get("access-control-allow-origin")).toBe("*");
    expect((await get("/in.php", V2)).headers.get("access-control-allow-origin")).toBeNull();
    expect(
      (await get("/res.php", { key: KEY, action: "getbalance", header_acao: "1" })).headers.get(
        "access-control-allow-origin",
      ),
    ).toBe("*");
  });
});

describe("bad in.php requests answer the protocol's code and create nothing", () => {
  const bigImage = Buffer.alloc(IMAGE_MAX_BYTES + 1, 7).toString("base64");
  const cases: Array<[string, () => Promise<Reply>, string, string]> = [
    ["missing key", () => get("/in.php", { ...V2, key: "" }), "ERROR_KEY_DOES_NOT_EXIST", "ERROR_KEY_DOES_NOT_EXIST"],
    ["unknown key", () => get("/in.php", { ...V2, key: "nope-nope" }), "ERROR_WRONG_USER_KEY", "ERROR_WRONG_USER_KEY"],
    [
      "unknown method",
      () => get("/in.php", { ...V2, method: "hcaptcha" }),
      "ERROR_BAD_PARAMETERS",
      "ERROR_BAD_PARAMETERS",
    ],
    [
      "missing googlekey",
      () => get("/in.php", { key: KEY, method: "userrecaptcha", pageurl: "https://example.com" }),
      "ERROR_GOOGLEKEY",
      "ERROR_GOOGLEKEY",
    ],
    [
      "missing sitekey (turnstile)",
      () => get("/in.php", { key: KEY, method: "turnstile", pageurl: "https://example.com" }),
      "ERROR_GOOGLEKEY",
      "ERROR_GOOGLEKEY",
    ],
    [
      "invalid pageurl",
      () => get("/in.php", { ...V2, pageurl: "ftp://example.com" }),
      "ERROR_PAGEURL",
      "ERROR_PAGEURL",
    ],
    [
      "bad geetest params",
      () => get("/in.php", { key: KEY, method: "geetest", gt: "x", challenge: "y", pageurl: "https://example.com" }),
      "ERROR_BAD_PARAMETERS",
      "ERROR_BAD_PARAMETERS",
    ],
    [
      "empty image",
      () => post("/in.php", new URLSearchParams({ key: KEY, method: "base64", body: "" })),
      "ERROR_ZERO_CAPTCHA_FILESIZE",
      "ERROR_ZERO_CAPTCHA_FILESIZE",
    ],
    [
      "oversized image (decoded over IMAGE_MAX_BYTES)",
      () => post("/in.php", { key: KEY, method: "base64", body: bigImage }),
      "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
      "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
    ],
    // a valid task with an ignored param padding the body: only the body limit can refuse it
    [
      "body over MAX_BODY_BYTES",
      () => post("/in.php", new URLSearchParams({ ...V2, pad: "x".repeat(MAX_BODY_BYTES) })),
      "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
      "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
    ],
    [
      "pingback",
      () => get("/in.php", { ...V2, pingback: "https://me.example.com/cb" }),
      "ERROR_PINGBACK_NOT_SUPPORTED",
      "ERROR_PINGBACK_NOT_SUPPORTED",
    ],
    [
      "proxy",
      () => get("/in.php", { ...V2, proxy: "u:p@10.0.0.1:3128", proxytype: "HTTP" }),
      "ERROR_PROXY_NOT_SUPPORTED",
      "ERROR_PROXY_NOT_SUPPORTED",
    ],
    ["malformed JSON body", () => post("/in.php", '{"key":'), "ERROR_BAD_PARAMETERS", "ERROR_BAD_PARAMETERS"],
  ];
  for (const [name, send, plainCode] of cases) {
    test(`${name}: ${plainCode}, no row, no message`, async () => {
      const before = await counts();
      const r = await send();
      expect(r.status).toBe(200);
      // a JSON body is answered in JSON even when it cannot be read: the clients that post JSON always ask for json=1
      if (r.contentType === JSON_CT) expect(r.body).toBe(`{"status":0,"request":"${plainCode}"}`);
      else {
        expect(r.contentType).toBe(PLAIN);
        expect(r.body).toBe(plainCode);
      }
      expect(await counts()).toEqual(before);
    });
  }

  test('the same refusals with json=1 are {"status":0,"request":"<code>"}', async () => {
    const before = await counts();
    for (const [params, c] of [
      [{ ...V2, key: "", json: "1" }, "ERROR_KEY_DOES_NOT_EXIST"],
      [{ ...V2, key: "nope-nope", json: "1" }, "ERROR_WRONG_USER_KEY"],
      [{ ...V2, method: "nope", json: "1" }, "ERROR_BAD_PARAMETERS"],
      [{ ...V2, googlekey: "", json: "1" }, "ERROR_GOOGLEKEY"],
      [{ ...V2, pingback: "https://me.example.com/cb", json: "1" }, "ERROR_PINGBACK_NOT_SUPPORTED"],
    ] as Array<[Record<string, string>, string]>) {
      const r = await get("/in.php", params);
      expect(r.contentType).toBe(JSON_CT);
      expect(r.body).toBe(`{"status":0,"request":"${c}"}`);
    }
    const big = await post("/in.php", { key: KEY, json: 1, method: "base64", body: bigImage });
    expect(big.body).toBe('{"status":0,"request":"ERROR_TOO_BIG_CAPTCHA_FILESIZE"}');
    expect(await counts()).toEqual(before);
  });
});

describe("res.php", () => {
  test("get: unfinished states are CAPCHA_NOT_READY", async () => {
    const id = await submit();
    for (const state of ["queued", "solving", "retrying"]) {
      await setRow(id, { state });
      expect((await get("/res.php", { key: KEY, action: "get", id })).body).toBe("CAPCHA_NOT_READY");
      const j = await get("/res.php", { key: KEY, action: "get", id, json: "1" });
      expect(j.contentType).toBe(JSON_CT);
      expect(j.body).toBe('{"status":0,"request":"CAPCHA_NOT_READY"}');
    }
  });

  test("get: a completed task answers OK|<token>, JSON status 1 with the token", async () => {
    const id = await submit();
    await setRow(id, { state: "completed", token: "03AGdBq2-TOKEN-1", expiresInMs: 60_000 });
    const plain = await get("/res.php", { key: KEY, action: "get", id });
    expect(plain.contentType).toBe(PLAIN);
    expect(plain.body).toBe("OK|03AGdBq2-TOKEN-1");
    const json = await get("/res.php", { key: KEY, action: "get", id, json: "1" });
    expect(json.contentType).toBe(JSON_CT);
    expect(json.body).toBe('{"status":1,"request":"03AGdBq2-TOKEN-1"}');
    // POST bodies work for res.php too
    expect((await post("/res.php", new URLSearchParams({ key: KEY, action: "get", id }))).body).toBe(
      "OK|03AGdBq2-TOKEN-1",
    );
  });

  test("get: Turnstile with json=1 adds useragent; plain stays OK|<token>", async () => {
    const id = await submit(TURNSTILE);
    await setRow(id, { state: "completed", token: "0.TS-TOKEN", userAgent: "Mozilla/5.0 Test", expiresInMs: 60_000 });
    expect((await get("/res.php", { key: KEY, action: "get", id })).body).toBe("OK|0.TS-TOKEN");
    expect((await get("/res.php", { key: KEY, action: "get", id, json: "1" })).body).toBe(
      '{"status":1,"request":"0.TS-TOKEN","useragent":"Mozilla/5.0 Test"}',
    );
  });

  test("get: expired, failed and cancelled tasks answer their codes and never the token", async () => {
    const cases: Array<[RowPatch, string]> = [
      [{ state: "completed", token: "SECRET-EXPIRED", expiresInMs: -1000 }, "ERROR_TOKEN_EXPIRED"],
      [{ state: "failed", errorCode: "ERROR_CAPTCHA_UNSOLVABLE" }, "ERROR_CAPTCHA_UNSOLVABLE"],
      [{ state: "failed", errorCode: "ERROR_PAGEURL" }, "ERROR_PAGEURL"],
      [{ state: "failed", errorCode: "ERROR_WRONG_USER_KEY" }, "ERROR_CAPTCHA_UNSOLVABLE"],
      [{ state: "failed", errorCode: "DEADLINE_EXCEEDED" }, "ERROR_CAPTCHA_UNSOLVABLE"],
      [{ state: "cancelled" }, "ERROR_CAPTCHA_UNSOLVABLE"],
    ];
    for (const [patch, c] of cases) {
      const id = await submit();
      await setRow(id, patch);
      expect((await get("/res.php", { key: KEY, action: "get", id })).body).toBe(c);
      expect((await get("/res.php", { key: KEY, action: "get", id, json: "1" })).body).toBe(
        `{"status":0,"request":"${c}"}`,
      );
    }
  });

  test("get: another key's task and an unknown id are ERROR_WRONG_CAPTCHA_ID; a malformed id ERROR_WRONG_ID_FORMAT", async () => {
    const id = await submit();
    await setRow(id, { state: "completed", token: "NOT-YOURS", expiresInMs: 60_000 });
    expect((await get("/res.php", { key: OTHER_KEY, action: "get", id })).body).toBe("ERROR_WRONG_CAPTCHA_ID");
    expect((await get("/res.php", { key: KEY, action: "get", id: "0190a000-0000-7000-8000-00000000dead" })).body).toBe(
      "ERROR_WRONG_CAPTCHA_ID",
    );
    expect((await get("/res.php", { key: KEY, action: "get", id: "4123456789" })).body).toBe("ERROR_WRONG_ID_FORMAT");
    expect((await get("/res.php", { key: KEY, action: "get", id: "4123456789", json: "1" })).body).toBe(
      '{"status":0,"request":"ERROR_WRONG_ID_FORMAT"}',
    );
    expect((await get("/res.php", { key: KEY, action: "get" })).body).toBe("ERROR_WRONG_ID_FORMAT");
  });

  test("bulk get: ids=a,b,c answers the |-joined answers without OK|, in the order asked", async () => {
    const [a, b] = [await submit(), await submit()];
    await setRow(a, { state: "completed", token: "TOKEN-A", expiresInMs: 60_000 });
    const unknown = "0190a000-0000-7000-8000-00000000beef";
    const ids = [a, b, unknown].join(",");
    const plain = await get("/res.php", { key: KEY, action: "get", ids });
    expect(plain.contentType).toBe(PLAIN);
    expect(plain.body).toBe("TOKEN-A|CAPCHA_NOT_READY|ERROR_WRONG_CAPTCHA_ID");
    expect((await get("/res.php", { key: KEY, action: "get", ids, json: "1" })).body).toBe(
      '{"status":1,"request":"TOKEN-A|CAPCHA_NOT_READY|ERROR_WRONG_CAPTCHA_ID"}',
    );
    expect((await get("/res.php", { key: KEY, action: "get", ids: `${a},77` })).body).toBe("ERROR_WRONG_ID_FORMAT");
  });

  test("get2: OK|<token>|0 in plain, price as a field in JSON", async () => {
    const id = await submit();
    await setRow(id, { state: "completed", token: "TOKEN-2", expiresInMs: 60_000 });
    expect((await get("/res.php", { key: KEY, action: "get2", id })).body).toBe("OK|TOKEN-2|0");
    expect((await get("/res.php", { key: KEY, action: "get2", id, json: "1" })).body).toBe(
      '{"status":1,"request":"TOKEN-2","price":"0"}',
    );
    await setRow(id, { state: "solving" });
    expect((await get("/res.php", { key: KEY, action: "get2", id })).body).toBe("CAPCHA_NOT_READY");
  });

  test("get2 on another key's task is ERROR_WRONG_CAPTCHA_ID and never shows its token (issue 14)", async () => {
    const id = await submit();
    await setRow(id, { state: "completed", token: "NOT-YOURS-2", expiresInMs: 60_000 });
    for (const json of ["0", "1"]) {
      const r = await get("/res.php", { key: OTHER_KEY, action: "get2", id, json });
      expect(r.body).not.toContain("NOT-YOURS-2");
      expect(r.body).toBe(json === "1" ? '{"status":0,"request":"ERROR_WRONG_CAPTCHA_ID"}' : "ERROR_WRONG_CAPTCHA_ID");
    }
  });

  test("getbalance answers the documented constant, bare in plain", async () => {
    const plain = await get("/res.php", { key: KEY, action: "getbalance" });
    expect(plain.contentType).toBe(PLAIN);
    expect(plain.body).toBe(FACADE_BALANCE);
    expect(plain.body).toBe("1000000");
    expect((await get("/res.php", { key: KEY, action: "getbalance", json: "1" })).body).toBe(
      '{"status":1,"request":"1000000"}',
    );
  });

  test("reportbad/reportgood: stored once for a completed task of the key (then ERROR_DUPLICATE_REPORT), ERROR_WRONG_CAPTCHA_ID otherwise", async () => {
    const id = await submit();
    expect((await get("/res.php", { key: KEY, action: "reportbad", id })).body).toBe("ERROR_WRONG_CAPTCHA_ID");
    await setRow(id, { state: "completed", token: "T", expiresInMs: 60_000 });
    // Completed without a provider task (no provider solved it): nothing to report.
    expect((await get("/res.php", { key: KEY, action: "reportbad", id })).body).toBe("ERROR_WRONG_CAPTCHA_ID");
    await database.sql`update tasks set provider_id = '7123', provider_key_ref = 'key_test' where id = ${id}`;
    expect((await get("/res.php", { key: OTHER_KEY, action: "reportgood", id })).body).toBe("ERROR_WRONG_CAPTCHA_ID");
    expect((await get("/res.php", { key: KEY, action: "reportbad", id })).body).toBe("OK_REPORT_RECORDED");
    expect((await get("/res.php", { key: KEY, action: "reportgood", id, json: "1" })).body).toBe(
      '{"status":0,"request":"ERROR_DUPLICATE_REPORT"}',
    );
    const rows = await database.sql<
      { accepted: boolean; state: string }[]
    >`select accepted, state from task_reports where task_id = ${id}`;
    expect([...rows]).toEqual([{ accepted: false, state: "pending" }]);
    expect((await get("/res.php", { key: KEY, action: "reportgood", id: "123" })).body).toBe("ERROR_WRONG_ID_FORMAT");
  });

  test("key and action errors", async () => {
    expect((await get("/res.php", { action: "getbalance" })).body).toBe("ERROR_KEY_DOES_NOT_EXIST");
    expect((await get("/res.php", { key: "nope-nope", action: "getbalance" })).body).toBe("ERROR_WRONG_USER_KEY");
    expect((await get("/res.php", { key: "nope-nope", action: "getbalance", json: "1" })).body).toBe(
      '{"status":0,"request":"ERROR_WRONG_USER_KEY"}',
    );
    expect((await get("/res.php", { key: KEY, action: "nope" })).body).toBe("ERROR_EMPTY_ACTION");
    expect((await get("/res.php", { key: KEY })).body).toBe("ERROR_EMPTY_ACTION");
    expect((await get("/res.php", { key: KEY, json: "1" })).body).toBe('{"status":0,"request":"ERROR_EMPTY_ACTION"}');
  });

  test("a res.php body over MAX_BODY_BYTES is ERROR_BAD_PARAMETERS, in JSON when the body is JSON", async () => {
    expect(
      (await post("/res.php", new URLSearchParams({ key: KEY, action: "getbalance", pad: "x".repeat(MAX_BODY_BYTES) })))
        .body,
    ).toBe("ERROR_BAD_PARAMETERS");
    expect(
      (await post("/res.php", { key: KEY, action: "getbalance", json: 1, pad: "x".repeat(MAX_BODY_BYTES) })).body,
    ).toBe('{"status":0,"request":"ERROR_BAD_PARAMETERS"}');
  });
});

test("the facade's body limit and protocol replies leave /v1 alone", async () => {
  const res = await app.request("/v1/tasks", {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ type: "image", params: { body: "A".repeat(MAX_BODY_BYTES + 10) } }),
  });
  expect(res.status).toBe(413);
  expect(res.headers.get("content-type")).toContain("application/problem+json");
  const health = await app.request("/healthz");
  expect(health.status).toBe(200);
});

test("when JetStream cannot take the task, in.php answers ERROR_NO_SLOT_AVAILABLE and leaves no row", async () => {
  await jsm.streams.delete(streams.tasks(REGION));
  try {
    const [{ n: rowsBefore }] = (await database.sql`select count(*)::int as n from tasks`) as unknown as [
      { n: number },
    ];
    const plain = await get("/in.php", V2);
    expect(plain.body).toBe("ERROR_NO_SLOT_AVAILABLE");
    const json = await get("/in.php", { ...V2, json: "1" });
    expect(json.body).toBe('{"status":0,"request":"ERROR_NO_SLOT_AVAILABLE"}');
    const [{ n: rowsAfter }] = (await database.sql`select count(*)::int as n from tasks`) as unknown as [{ n: number }];
    expect(rowsAfter).toBe(rowsBefore);
  } finally {
    await ensureStreams(jsm, { region: REGION });
  }
}, 15_000);

test("a fenced region's in.php answers ERROR_NO_SLOT_AVAILABLE (clients retry), names the other region, and stores nothing", async () => {
  const fenced = createApp({
    config: {
      REGION,
      MAX_BODY_BYTES,
      IMAGE_MAX_BYTES,
      MAX_WAIT_SECONDS: 5,
      TASK_DEADLINE_MS: 600_000,
      regions: [REGION, "other"],
    },
    store: createTaskStore(database.db),
    queue: createTaskQueue(nc, REGION, 1000),
    watcher: createTaskWatcher(nc, REGION),
    apiKeys: createApiKeys([KEY, OTHER_KEY]),
    log: createLogger("facade-test", { level: "silent" }),
    fence: { allows: () => false },
  });
  const [{ n: rowsBefore }] = (await database.sql`select count(*)::int as n from tasks`) as unknown as [{ n: number }];
  const res = await fenced.request(`/in.php?${new URLSearchParams(V2)}`);
  expect(await res.text()).toBe("ERROR_NO_SLOT_AVAILABLE");
  expect(res.headers.get("x-try-regions")).toBe("other");
  const [{ n: rowsAfter }] = (await database.sql`select count(*)::int as n from tasks`) as unknown as [{ n: number }];
  expect(rowsAfter).toBe(rowsBefore);
});

describe("the facade's reads and key check (issue 14, low)", () => {
  const counted = () => {
    const store = createTaskStore(database.db);
    const calls = { get: 0, getMany: 0 };
    const a = createApp({
      config: { REGION, MAX_BODY_BYTES, IMAGE_MAX_BYTES, MAX_WAIT_SECONDS: 5, TASK_DEADLINE_MS: 600_000 },
      store: {
        ...store,
        get: (id: string) => (calls.get++, store.get(id)),
        getMany: (ids: readonly string[]) => (calls.getMany++, store.getMany(ids)),
      },
      queue: createTaskQueue(nc, REGION, 1000),
      watcher: createTaskWatcher(nc, REGION),
      apiKeys: createApiKeys([KEY, OTHER_KEY]),
      log: createLogger("facade-test", { level: "silent" }),
    });
    return { a, calls };
  };

  test("a bulk res.php get is answered with one query, whatever the number of ids, in the order asked, another key's task unknown", async () => {
    const ids = [await submit(), await submit(), await submit()];
    await setRow(ids[1]!, { state: "completed", token: "BULK-1", expiresInMs: 60_000 });
    const { a, calls } = counted();
    const unknown = "0190a000-0000-7000-8000-00000000cafe";
    const res = await a.request(
      `/res.php?${new URLSearchParams({ key: KEY, action: "get", ids: [...ids, unknown].join(",") })}`,
    );
    expect(await res.text()).toBe("CAPCHA_NOT_READY|BULK-1|CAPCHA_NOT_READY|ERROR_WRONG_CAPTCHA_ID");
    expect(calls).toEqual({ get: 0, getMany: 1 });
    const theirs = await a.request(
      `/res.php?${new URLSearchParams({ key: OTHER_KEY, action: "get", ids: ids.join(",") })}`,
    );
    expect(await theirs.text()).toBe("ERROR_WRONG_CAPTCHA_ID|ERROR_WRONG_CAPTCHA_ID|ERROR_WRONG_CAPTCHA_ID");
  });

  test("a wrong key in the query string is refused before the body is parsed", async () => {
    // Parsed first (as before), this body would answer ERROR_BAD_PARAMETERS: the key is checked first.
    const res = await app.request(`/in.php?key=not-a-key`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{ not json",
    });
    expect(await res.text()).toBe('{"status":0,"request":"ERROR_WRONG_USER_KEY"}');
    const multipart = await app.request(`/in.php?key=not-a-key`, {
      method: "POST",
      headers: { "content-type": "multipart/form-data; boundary=x" },
      body: "garbage",
    });
    expect(await multipart.text()).toBe("ERROR_WRONG_USER_KEY");
    // A key given only in the body still works (checked after reading it).
    const ok = await app.request(`/res.php`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ key: KEY, action: "getbalance" }).toString(),
    });
    expect(await ok.text()).toBe("1000000");
  });
});
