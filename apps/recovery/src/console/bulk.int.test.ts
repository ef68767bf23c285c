// The console's bulk actions against real NATS and Postgres: 200 dead letters redriven once each
// (each row queued once, one message each on TASKS, one `redriven` event each, one audit row), a
// second confirm that redrives none, the operator role, a bad filter named, forged and foreign
// tokens refused, and a bulk cancel of one client's unfinished tasks that leaves another's alone.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { natsEnv } from "@pipeline/devstack";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { createLogger } from "@pipeline/shared/log";
import { ensureStreams } from "@pipeline/shared/nats";
import { streams } from "@pipeline/shared/subjects";
import { loadConfig } from "../config.ts";
import { openContext } from "../context.ts";
import { type ConsoleServer, startConsole } from "./server.ts";

const region = "bulk";
const OPERATOR = `op-${crypto.randomUUID()}`;
const VIEWER = `view-${crypto.randomUUID()}`;
let nats: TestNats;
let tdb: TestDatabase;
let ctx: Awaited<ReturnType<typeof openContext>>;
const log = createLogger("bulk-test", { level: "warn" });
const consoles: ConsoleServer[] = [];

const env = () => ({
  NATS_URL: nats.url,
  ...natsEnv(nats, "recovery"),
  DATABASE_URL: tdb.url,
  REGION: region,
  SNAPSHOT_DIR: mkdtempSync(join(tmpdir(), "bulk-int-")),
  PROVIDER_URL: "http://127.0.0.1:9",
  CONSOLE_PORT: "0",
  CONSOLE_TOKENS: `ops:operator:${OPERATOR},watcher:viewer:${VIEWER}`,
});

async function open(): Promise<string> {
  const c = (await startConsole(loadConfig(env()), ctx, log))!;
  consoles.push(c);
  return `http://127.0.0.1:${new URL(c.url).port}`;
}

/** `n` tasks of `owner` in `state`, one a second back from an hour ago (the oldest first in id order of `tag`). */
async function seed(
  n: number,
  owner: string,
  state: string,
  params = `{"sitekey":"sk","pageurl":"https://a.example/"}`,
) {
  await ctx.database.sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, version, attempts, created_at, updated_at, completed_at)
    select gen_random_uuid(), ${owner}, 'h', ${region}, 'recaptcha_v2', 'normal', ${params}::jsonb, ${state}, 3, 2,
           now() - interval '1 hour' + i * interval '1 second', now(), case when ${state} in ('failed','completed') then now() end
    from generate_series(1, ${n}) i`;
}

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats({ regions: [region] }), createTestDatabase("bulk_int")]);
  ctx = await openContext(loadConfig(env()), log, "bulk-test");
  await ensureStreams(ctx.jsm, { region });
}, 60_000);

afterAll(async () => {
  for (const c of consoles) await c.stop();
  await ctx?.close();
  await nats?.dispose();
  await tdb?.drop();
});

const post = (base: string, path: string, body: unknown, token = OPERATOR, action = "bulk") =>
  fetch(`${base}/console/api/bulk/${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "x-console-action": action },
    body: JSON.stringify(body),
  });

/** Every message of a stream: its subject and body. */
async function messages(stream: string) {
  const info = await ctx.jsm.streams.info(stream);
  const out: Array<{ subject: string; body: Record<string, unknown> }> = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const m = await ctx.jsm.streams.getMessage(stream, { seq }).catch(() => null);
    if (m) out.push({ subject: m.subject, body: m.json() });
  }
  return out;
}

test("a bulk redrive of 200 dead letters redrives each once, audits once; a second confirm redrives none", async () => {
  const base = await open();
  await seed(200, "acme", "failed");
  await seed(3, "acme", "failed", "{}"); // erased by retention: not redriven, named
  await seed(5, "other", "completed");
  const p = await post(base, "preview", { action: "redrive", filter: { client: "acme" } });
  expect(p.status).toBe(200);
  const preview = (await p.json()) as Record<string, unknown> & { sample: string[]; token: string };
  expect(preview.count).toBe(203);
  expect(preview.limit).toBe(1000);
  expect(preview.sample).toHaveLength(10);
  expect(preview.line).toBe("203 tasks match; redrive them?");
  expect(preview.filter).toEqual({ state: "failed", client: "acme", region });

  const c = await post(base, "confirm", { action: "redrive", token: preview.token });
  expect(c.status).toBe(200);
  const r = (await c.json()) as Record<string, unknown>;
  expect(r.line).toBe("redriven 200 of 203; 3 refused (3 params erased by retention)");
  expect(r.done).toBe(200);

  const rows = await ctx.database.sql<{ state: string; redrives: number; n: number }[]>`
    select state, redrives, count(*)::int as n from tasks where owner = 'acme' group by 1, 2 order by 1`;
  expect([...rows]).toEqual([
    { state: "failed", redrives: 0, n: 3 },
    { state: "queued", redrives: 1, n: 200 },
  ]);
  const tasks = await messages(streams.tasks(region));
  expect(tasks).toHaveLength(200);
  expect(new Set(tasks.map((m) => m.body.id)).size).toBe(200);
  const redriven = (await messages(streams.events(region))).filter((m) => m.body.kind === "redriven");
  expect(redriven).toHaveLength(200);
  expect(redriven[0]!.body.data).toMatchObject({ by: "console:ops", redrives: 1 });
  const audit = await ctx.database.sql<{ actor: string; action: string; detail: Record<string, unknown> }[]>`
    select actor, action, detail from audit_log order by id`;
  expect(audit).toHaveLength(1);
  expect(audit[0]).toMatchObject({ actor: "console:ops", action: "bulk.redrive" });
  expect(audit[0]!.detail).toMatchObject({
    done: 200,
    attempted: 203,
    previewed: 203,
    refused: { purged: 3 },
    via: "console",
  });

  // The same token again: the 200 are no longer failed; nothing is published twice.
  const again = (await (await post(base, "confirm", { action: "redrive", token: preview.token })).json()) as Record<
    string,
    unknown
  >;
  expect(again.line).toBe("redriven 0 of 3; 3 refused (3 params erased by retention); previewed 203, now 3");
  expect(await messages(streams.tasks(region))).toHaveLength(200);
  await ctx.database.sql`delete from tasks where params = '{}'::jsonb`;
  const p2 = (await (await post(base, "preview", { action: "redrive", filter: { client: "acme" } })).json()) as {
    token: string;
    line: string;
  };
  expect(p2.line).toBe("no task matches; nothing to redrive");
  const third = (await (await post(base, "confirm", { action: "redrive", token: p2.token })).json()) as {
    line: string;
  };
  expect(third.line).toBe("redriven 0 of 0; 0 refused");
  expect(await messages(streams.tasks(region))).toHaveLength(200);
  expect((await ctx.database.sql`select 1 from audit_log`).length).toBe(3);
}, 60_000);

test("a viewer gets 403, a missing action header 400, a bad filter a 400 naming the field, a forged or foreign token a 400 naming token", async () => {
  const base = await open();
  expect((await post(base, "preview", { action: "redrive", filter: {} }, VIEWER)).status).toBe(403);
  expect((await post(base, "confirm", { action: "redrive", token: "x.y" }, VIEWER)).status).toBe(403);
  expect((await post(base, "preview", { action: "redrive", filter: {} }, OPERATOR, "redrive")).status).toBe(400);
  const bad = async (body: unknown) => {
    const r = await post(base, "preview", body);
    expect(r.status).toBe(400);
    return ((await r.json()) as { fields: string[] }).fields;
  };
  expect(await bad({ action: "redrive", filter: { priority: "urgent" } })).toEqual(["filter.priority"]);
  expect(await bad({ action: "redrive", filter: { region: "elsewhere" } })).toEqual(["filter.region"]);
  expect(await bad({ action: "redrive", filter: { state: "queued" } })).toEqual(["filter.state"]);
  expect(await bad({ action: "cancel", filter: {} })).toEqual(["filter.client"]);
  expect(await bad({ action: "purge", filter: {} })).toEqual(["action"]);
  await seed(4, "tok", "failed");
  const { token } = (await (await post(base, "preview", { action: "redrive", filter: { client: "tok" } })).json()) as {
    token: string;
  };
  const [body, sig] = token.split(".");
  const widened = JSON.parse(Buffer.from(body!, "base64url").toString());
  delete widened.filter.client;
  const forged = `${Buffer.from(JSON.stringify(widened)).toString("base64url")}.${sig}`;
  const refused = async (base2: string, t: string, action = "redrive") => {
    const r = await post(base2, "confirm", { action, token: t });
    expect(r.status).toBe(400);
    return (await r.json()) as { error: string; fields: string[] };
  };
  expect((await refused(base, forged)).fields).toEqual(["token"]);
  expect((await refused(base, token, "cancel")).error).toContain("not a bulk cancel");
  // Another console (a restart: a new secret) does not take it.
  expect((await refused(await open(), token)).error).toContain("not issued by this console");
  const left = await ctx.database.sql`select 1 from tasks where owner = 'tok' and state = 'failed'`;
  expect(left.length).toBe(4);
}, 60_000);

test("a bulk cancel takes one client's unfinished tasks and leaves the others; each gets its cancelled event", async () => {
  const base = await open();
  await seed(30, "alpha", "queued");
  await seed(5, "alpha", "solving");
  await seed(3, "alpha", "completed");
  await seed(20, "beta", "queued");
  const before = (await messages(streams.events(region))).length;
  const p = (await (await post(base, "preview", { action: "cancel", filter: { client: "alpha" } })).json()) as {
    count: number;
    token: string;
  };
  expect(p.count).toBe(35);
  const r = (await (await post(base, "confirm", { action: "cancel", token: p.token })).json()) as { line: string };
  expect(r.line).toBe("cancelled 35 of 35; 0 refused");
  const rows = await ctx.database.sql<{ owner: string; state: string; n: number }[]>`
    select owner, state, count(*)::int as n from tasks where owner in ('alpha', 'beta') group by 1, 2 order by 1, 2`;
  expect([...rows]).toEqual([
    { owner: "alpha", state: "cancelled", n: 35 },
    { owner: "alpha", state: "completed", n: 3 },
    { owner: "beta", state: "queued", n: 20 },
  ]);
  const events = (await messages(streams.events(region))).slice(before);
  expect(events).toHaveLength(35);
  expect(events.every((e) => e.subject === `events.${region}.cancelled` && e.body.state === "cancelled")).toBe(true);
  const audit = await ctx.database.sql<{ action: string; detail: Record<string, unknown> }[]>`
    select action, detail from audit_log where action = 'bulk.cancel'`;
  expect(audit).toHaveLength(1);
  expect(audit[0]!.detail).toMatchObject({ done: 35, filter: { client: "alpha", region } });
  // A search (a union of index lookups) over every unfinished state (a union of states) counts each task once.
  const searched = (await (
    await post(base, "preview", { action: "cancel", filter: { client: "beta", search: "a.example/", from: "1d" } })
  ).json()) as { count: number; filter: Record<string, string> };
  expect(searched.count).toBe(20);
  expect(searched.filter.from).toMatch(/^\d{4}-\d\d-\d\dT/);
}, 60_000);

/** `bun run recovery <args>` against the test's NATS and Postgres. */
async function cli(...args: string[]) {
  const { CONSOLE_TOKENS: _, CONSOLE_PORT: __, ...e } = env();
  const p = Bun.spawn([process.execPath, join(import.meta.dir, "..", "cli.ts"), ...args], {
    env: { ...process.env, ...e },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { out, err, code };
}

test("the CLI: redrive-all previews without --yes, runs with it (audited as bulk.redrive, via cli); cancel-all needs --client", async () => {
  await seed(12, "clix", "failed");
  const dry = await cli("redrive-all", "--client", "clix", "--since", "1d");
  expect(dry.err).toBe("");
  expect(dry.code).toBe(0);
  expect(dry.out).toContain("12 tasks match; redrive them?");
  expect(dry.out).toContain("nothing changed: run again with --yes");
  expect((await ctx.database.sql`select 1 from tasks where owner = 'clix' and state = 'failed'`).length).toBe(12);
  const run = await cli("redrive-all", "--client", "clix", "--yes");
  expect(run.code).toBe(0);
  expect(run.out).toContain("redriven 12 of 12; 0 refused");
  const [a] = await ctx.database.sql<{ actor: string; detail: Record<string, unknown> }[]>`
    select actor, detail from audit_log where action = 'bulk.redrive' and detail->'filter'->>'client' = 'clix'`;
  expect(a!.detail).toMatchObject({ via: "cli", done: 12 });
  expect(a!.actor).not.toContain("console:");
  expect((await cli("redrive-all", "--client", "clix", "--yes")).out).toContain("redriven 0 of 0; 0 refused");
  const bad = await cli("cancel-all", "--state", "queued");
  expect(bad.code).toBe(2);
  expect(bad.err).toContain("--client: a bulk cancel needs a client");
  const badSince = await cli("redrive-all", "--since", "soon");
  expect(badSince.code).toBe(2);
  expect(badSince.err).toContain("--since:");
}, 60_000);

test("a bulk redrive racing single redrives of the same tasks: each task is redriven and published once", async () => {
  const base = await open();
  await seed(50, "race", "failed");
  const ids = (await ctx.database.sql<{ id: string }[]>`select id from tasks where owner = 'race'`).map((r) => r.id);
  const before = (await messages(streams.tasks(region))).length;
  const { token } = (await (await post(base, "preview", { action: "redrive", filter: { client: "race" } })).json()) as {
    token: string;
  };
  const single = (id: string) =>
    fetch(`${base}/console/api/tasks/${id}/redrive`, {
      method: "POST",
      headers: { authorization: `Bearer ${OPERATOR}`, "x-console-action": "redrive" },
    }).then((r) => r.status);
  const [bulk, ...singles] = await Promise.all([
    post(base, "confirm", { action: "redrive", token }).then((r) => r.json() as Promise<{ done: number }>),
    ...ids.map(single),
  ]);
  const singleDone = singles.filter((st) => st === 202).length;
  expect(singles.every((st) => st === 202 || st === 409)).toBe(true);
  expect(bulk.done + singleDone).toBe(50);
  const published = (await messages(streams.tasks(region))).slice(before);
  expect(published).toHaveLength(50);
  expect(new Set(published.map((m) => m.body.id))).toEqual(new Set(ids));
  const [row] = await ctx.database.sql<{ n: number; max: number }[]>`
    select count(*)::int as n, max(redrives)::int as max from tasks where owner = 'race' and state = 'queued'`;
  expect(row).toEqual({ n: 50, max: 1 });
}, 60_000);
