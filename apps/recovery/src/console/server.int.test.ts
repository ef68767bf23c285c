// The console's listener against real NATS and Postgres (issue 34): Host names, same-origin POSTs,
// sign-out that revokes, the cookie's Secure flag, throttled sign-ins, the peer address in the log,
// and timelines that do not scan EVENTS on every refresh. The browser test (tests/console.test.ts)
// covers the page itself.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { natsEnv } from "@pipeline/devstack";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, ensureStreams, type NatsConnection } from "@pipeline/shared/nats";
import type { TaskEvent } from "@pipeline/shared/schemas";
import { eventSubject, streams } from "@pipeline/shared/subjects";
import { loadConfig } from "../config.ts";
import { openContext } from "../context.ts";
import { type ConsoleServer, startConsole } from "./server.ts";

const region = "cons";
const OPERATOR = `op-${crypto.randomUUID()}`;
const VIEWER = `view-${crypto.randomUUID()}`;
let nats: TestNats;
let tdb: TestDatabase;
let admin: NatsConnection;
let ctx: Awaited<ReturnType<typeof openContext>>;
const lines: string[] = [];
const log = createLogger("console-test", { level: "info", destination: { write: (s: string) => void lines.push(s) } });
const consoles: ConsoleServer[] = [];

const env = (over: Record<string, string> = {}) => ({
  NATS_URL: nats.url,
  ...natsEnv(nats, "recovery"),
  DATABASE_URL: tdb.url,
  REGION: region,
  SNAPSHOT_DIR: mkdtempSync(join(tmpdir(), "console-int-")),
  // Nothing listens there: assess's provider check fails fast.
  PROVIDER_URL: "http://127.0.0.1:9",
  CONSOLE_PORT: "0",
  CONSOLE_TOKENS: `ops:operator:${OPERATOR},watcher:viewer:${VIEWER}`,
  ...over,
});

/** A console of its own (its own sessions and throttle), on a free port. */
async function open(over: Record<string, string> = {}): Promise<{ base: string; origin: string; port: number }> {
  const c = (await startConsole(loadConfig(env(over)), ctx, log))!;
  consoles.push(c);
  const u = new URL(c.url);
  const port = Number(u.port);
  return { base: `http://127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}`, port };
}

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats({ regions: [region] }), createTestDatabase("console_int")]);
  admin = await connectNats(nats.url, "console-test-admin", nats.auth("admin"));
  ctx = await openContext(loadConfig(env()), log, "console-test");
  await ensureStreams(ctx.jsm, { region });
}, 60_000);

afterAll(async () => {
  for (const c of consoles) await c.stop();
  await ctx?.close();
  await admin?.close();
  await nats?.dispose();
  await tdb?.drop();
});

const form = (token: string) => new URLSearchParams({ token });

/** Signs in through the form (same origin); the session cookie as a Cookie header value. */
async function signIn(c: { base: string; origin: string }, token = OPERATOR): Promise<string> {
  const r = await fetch(`${c.base}/console/login`, {
    method: "POST",
    body: form(token),
    headers: { origin: c.origin },
    redirect: "manual",
  });
  expect(r.status).toBe(303);
  const set = r.headers.get("set-cookie")!;
  return set.split(";")[0]!;
}

test("a Host name not in CONSOLE_HOST_NAMES is answered 421 before anything else; the loopback names and listed names are served", async () => {
  const c = await open({ CONSOLE_HOST_NAMES: "console.internal.example" });
  const get = (host: string) => fetch(`${c.base}/console/login`, { headers: { host }, redirect: "manual" });
  // DNS rebinding: a page of evil.example whose name now points at 127.0.0.1.
  for (const host of [`evil.example:${c.port}`, "evil.example", `console.internal.example.evil.example:${c.port}`]) {
    const r = await get(host);
    expect(r.status).toBe(421);
  }
  expect(
    (
      await fetch(`${c.base}/console/api/state`, {
        headers: { host: `evil.example:${c.port}`, authorization: `Bearer ${OPERATOR}` },
      })
    ).status,
  ).toBe(421);
  for (const host of [
    `127.0.0.1:${c.port}`,
    `localhost:${c.port}`,
    `LOCALHOST:${c.port}`,
    `[::1]:${c.port}`,
    `console.internal.example:${c.port}`,
    "console.internal.example",
  ]) {
    const r = await get(host);
    expect(r.status).toBe(200);
  }
  // Default (no CONSOLE_HOST_NAMES): the loopback names only.
  const d = await open();
  expect(
    (await fetch(`${d.base}/console/login`, { headers: { host: `console.internal.example:${d.port}` } })).status,
  ).toBe(421);
  expect((await fetch(`${d.base}/console/login`, { headers: { host: `localhost:${d.port}` } })).status).toBe(200);
}, 30_000);

test("a POST from another origin is refused 403; without Origin, only a same-origin fetch (Sec-Fetch-Site) or a Bearer script passes", async () => {
  const c = await open();
  const login = (headers: Record<string, string>) =>
    fetch(`${c.base}/console/login`, { method: "POST", body: form(OPERATOR), headers, redirect: "manual" });
  for (const origin of [
    "http://evil.example",
    `http://localhost:${c.port + 1}`,
    `http://127.0.0.1:${c.port + 1}`,
    "null",
  ])
    expect((await login({ origin })).status).toBe(403);
  // No Origin, no Sec-Fetch-Site: refused (every browser sends one of them with a POST).
  expect((await login({})).status).toBe(403);
  expect((await login({ "sec-fetch-site": "cross-site" })).status).toBe(403);
  expect((await login({ "sec-fetch-site": "same-site" })).status).toBe(403);
  expect((await login({ "sec-fetch-site": "same-origin" })).status).toBe(303);
  // What the console's own form sends under its Referrer-Policy no-referrer.
  expect((await login({ origin: "null", "sec-fetch-site": "same-origin" })).status).toBe(303);
  expect((await login({ origin: "null", "sec-fetch-site": "cross-site" })).status).toBe(403);
  expect((await login({ origin: c.origin, "sec-fetch-site": "cross-site" })).status).toBe(403);
  expect((await login({ origin: c.origin })).status).toBe(303);
  expect((await login({ origin: `http://localhost:${c.port}`, host: `localhost:${c.port}` })).status).toBe(303);

  const cookie = await signIn(c);
  const redrive = (headers: Record<string, string>) =>
    fetch(`${c.base}/console/api/tasks/${crypto.randomUUID()}/redrive`, {
      method: "POST",
      headers: { "x-console-action": "redrive", ...headers },
    });
  expect((await redrive({ cookie, origin: "http://evil.example" })).status).toBe(403);
  expect((await redrive({ cookie, origin: `http://localhost:${c.port + 1}` })).status).toBe(403);
  expect((await redrive({ cookie })).status).toBe(403);
  // The same-origin page's redrive reaches the handler (no such task).
  expect((await redrive({ cookie, origin: c.origin })).status).toBe(404);
  // A script with its token (no ambient credential to forge) needs no Origin; a foreign one is still refused.
  expect((await redrive({ authorization: `Bearer ${OPERATOR}` })).status).toBe(404);
  expect((await redrive({ authorization: `Bearer ${OPERATOR}`, origin: "http://evil.example" })).status).toBe(403);
  // Sign-out from another origin does nothing.
  expect(
    (
      await fetch(`${c.base}/console/logout`, {
        method: "POST",
        headers: { cookie, origin: "http://evil.example" },
        redirect: "manual",
      })
    ).status,
  ).toBe(403);
  expect((await fetch(`${c.base}/console/api/state`, { headers: { cookie } })).status).toBe(200);
}, 30_000);

test("sign-out revokes the session: a copy of the cookie no longer works afterwards", async () => {
  const c = await open();
  const cookie = await signIn(c);
  const other = await signIn(c, VIEWER);
  expect((await fetch(`${c.base}/console/api/state`, { headers: { cookie } })).status).toBe(200);
  const out = await fetch(`${c.base}/console/logout`, {
    method: "POST",
    headers: { cookie, origin: c.origin },
    redirect: "manual",
  });
  expect(out.status).toBe(303);
  expect(out.headers.get("location")).toBe("/console/login");
  // The copied cookie, sent again as it was: refused everywhere.
  expect((await fetch(`${c.base}/console/api/state`, { headers: { cookie } })).status).toBe(401);
  expect((await fetch(`${c.base}/console`, { headers: { cookie }, redirect: "manual" })).status).toBe(302);
  const r = await fetch(`${c.base}/console/api/tasks/${crypto.randomUUID()}/redrive`, {
    method: "POST",
    headers: { cookie, origin: c.origin, "x-console-action": "redrive" },
  });
  expect(r.status).toBe(401);
  // Another session is not touched.
  expect((await fetch(`${c.base}/console/api/state`, { headers: { cookie: other } })).status).toBe(200);
}, 30_000);

test("the session cookie is Secure when the console listens beyond loopback or CONSOLE_COOKIE_SECURE=always, not on loopback", async () => {
  const attrs = async (c: { base: string; origin: string }) => {
    const r = await fetch(`${c.base}/console/login`, {
      method: "POST",
      body: form(OPERATOR),
      headers: { origin: c.origin },
      redirect: "manual",
    });
    expect(r.status).toBe(303);
    return r.headers
      .get("set-cookie")!
      .split(";")
      .map((s) => s.trim().toLowerCase());
  };
  const loopback = await attrs(await open());
  expect(loopback).toContain("httponly");
  expect(loopback).toContain("samesite=strict");
  expect(loopback).not.toContain("secure");
  expect(await attrs(await open({ CONSOLE_HOST: "0.0.0.0" }))).toContain("secure");
  expect(await attrs(await open({ CONSOLE_COOKIE_SECURE: "always" }))).toContain("secure");
}, 30_000);

test("failed sign-ins from one address are throttled: 429 with Retry-After, whatever token comes next, form or Bearer", async () => {
  const c = await open({ CONSOLE_SIGNIN_MAX_FAILURES: "3", CONSOLE_SIGNIN_WINDOW_MS: "60000" });
  const login = (token: string, headers: Record<string, string> = {}) =>
    fetch(`${c.base}/console/login`, {
      method: "POST",
      body: form(token),
      headers: { origin: c.origin, ...headers },
      redirect: "manual",
    });
  // A forwarded-for header does not buy a fresh allowance: the connection's address is counted.
  for (let i = 0; i < 3; i++)
    expect((await login(`wrong-token-${i}-0123456789`, { "x-forwarded-for": `198.51.100.${i}` })).status).toBe(401);
  for (const r of [
    await login("wrong-token-x-0123456789"),
    await login(OPERATOR),
    await fetch(`${c.base}/console/api/state`, { headers: { authorization: `Bearer ${OPERATOR}` } }),
  ]) {
    expect(r.status).toBe(429);
    const wait = Number(r.headers.get("retry-after"));
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(60);
  }
  // Wrong Bearer tokens count too: another console, three wrong tokens, then the right one is refused.
  const d = await open({ CONSOLE_SIGNIN_MAX_FAILURES: "3" });
  for (let i = 0; i < 3; i++)
    expect(
      (await fetch(`${d.base}/console/api/state`, { headers: { authorization: `Bearer wrong-${i}-0123456789abcdef` } }))
        .status,
    ).toBe(401);
  expect(
    (await fetch(`${d.base}/console/api/state`, { headers: { authorization: `Bearer ${OPERATOR}` } })).status,
  ).toBe(429);
  // A window later the address may try again.
  const e = await open({ CONSOLE_SIGNIN_MAX_FAILURES: "2", CONSOLE_SIGNIN_WINDOW_MS: "1000" });
  const eLogin = (token: string) =>
    fetch(`${e.base}/console/login`, {
      method: "POST",
      body: form(token),
      headers: { origin: e.origin },
      redirect: "manual",
    });
  for (let i = 0; i < 2; i++) expect((await eLogin(`wrong-token-${i}-0123456789`)).status).toBe(401);
  expect((await eLogin(OPERATOR)).status).toBe(429);
  await Bun.sleep(1100);
  expect((await eLogin(OPERATOR)).status).toBe(303);
}, 30_000);

test("a refused sign-in is logged with the connection's address, never the X-Forwarded-For a client sends", async () => {
  const c = await open();
  lines.length = 0;
  const r = await fetch(`${c.base}/console/login`, {
    method: "POST",
    body: form("wrong-token-0123456789"),
    headers: { origin: c.origin, "x-forwarded-for": "203.0.113.77" },
    redirect: "manual",
  });
  expect(r.status).toBe(401);
  const refused = lines
    .map((l) => JSON.parse(l) as { msg: string; from?: string })
    .filter((l) => l.msg === "console: sign-in refused");
  expect(refused.length).toBe(1);
  expect(refused[0]!.from).toBe("127.0.0.1");
  expect(lines.join("\n")).not.toContain("203.0.113.77");
}, 30_000);

/** A task row of this region, in `state` at `version`. */
async function insertTask(id: string, state: string, version: number) {
  await ctx.database.sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, version, attempts, created_at, updated_at, completed_at)
    values (${id}, 'owner-1', 'hash', ${region}, 'turnstile', 'normal', ${JSON.stringify({ sitekey: "s", pageurl: "https://example.com/t" })}::text::jsonb,
            ${state}, ${version}, 1, now() - interval '1 minute', now(), case when ${state} = 'completed' then now() end)`;
}
const event = (taskId: string, kind: TaskEvent["kind"], state: TaskEvent["state"], version: number): TaskEvent => ({
  taskId,
  kind,
  state,
  version,
  region,
  at: new Date().toISOString(),
  data: { worker: "solver-1" },
});
async function publish(evs: TaskEvent[]) {
  for (const ev of evs) await ctx.js.publish(eventSubject(region, ev.kind), JSON.stringify(ev));
}

test("a task's timeline reads EVENTS once per session, then only what is new: N refreshes do not scan the stream each time", async () => {
  const c = await open();
  const cookie = await signIn(c);
  // Consumers created on EVENTS (the ordered consumers a timeline reads with), counted at the server.
  let created = 0;
  const stream = streams.events(region);
  const counter = admin.subscribe(`$JS.API.CONSUMER.CREATE.${stream}.>`, { callback: () => void created++ });
  const counter2 = admin.subscribe(`$JS.API.CONSUMER.CREATE.${stream}`, { callback: () => void created++ });
  await admin.flush();
  const done = crypto.randomUUID();
  const live = crypto.randomUUID();
  await insertTask(done, "completed", 3);
  await insertTask(live, "solving", 1);
  // Other tasks' events around them: a busy stream.
  const filler = Array.from({ length: 1500 }, () => event(crypto.randomUUID(), "accepted", "queued", 0));
  await publish(filler.slice(0, 700));
  await publish([
    event(done, "accepted", "queued", 0),
    event(live, "accepted", "queued", 0),
    event(done, "solving", "solving", 1),
    event(live, "solving", "solving", 1),
  ]);
  await publish(filler.slice(700));
  await publish([event(done, "completed", "completed", 3)]);
  const timeline = async (id: string) => {
    const r = await fetch(`${c.base}/console/api/tasks/${id}`, { headers: { cookie } });
    expect(r.status).toBe(200);
    return (await r.json()) as { events: Array<{ kind: string }>; task: { state: string } };
  };
  const first = await timeline(done);
  expect(first.events.map((e) => e.kind)).toEqual(["accepted", "solving", "completed"]);
  await admin.flush();
  const afterFirst = created;
  expect(afterFirst).toBeGreaterThanOrEqual(1);
  // The page refreshes every 2 s: ten more reads of a finished task touch EVENTS no more.
  for (let i = 0; i < 10; i++)
    expect((await timeline(done)).events.map((e) => e.kind)).toEqual(["accepted", "solving", "completed"]);
  await admin.flush();
  expect(created).toBe(afterFirst);

  // A task in flight: read once, then only when the stream has something new, from where it stopped.
  expect((await timeline(live)).events.map((e) => e.kind)).toEqual(["accepted", "solving"]);
  await admin.flush();
  const afterLive = created;
  for (let i = 0; i < 5; i++) expect((await timeline(live)).events.map((e) => e.kind)).toEqual(["accepted", "solving"]);
  await admin.flush();
  expect(created).toBe(afterLive);
  await ctx.database.sql`update tasks set state = 'completed', version = 3, completed_at = now() where id = ${live}`;
  await publish([event(live, "completed", "completed", 3)]);
  const t = await timeline(live);
  expect(t.events.map((e) => e.kind)).toEqual(["accepted", "solving", "completed"]);
  expect(t.task.state).toBe("completed");
  await admin.flush();
  expect(created - afterLive).toBeLessThanOrEqual(1);
  const settled = created;
  for (let i = 0; i < 5; i++) await timeline(live);
  await admin.flush();
  expect(created).toBe(settled);
  // Another session reads the stream for itself (a cache per session), and sign-out drops it.
  const other = await signIn(c, VIEWER);
  const r = await fetch(`${c.base}/console/api/tasks/${done}`, { headers: { cookie: other } });
  expect(((await r.json()) as { events: unknown[] }).events.length).toBe(3);
  counter.unsubscribe();
  counter2.unsubscribe();
}, 60_000);
