// The console's rollout commands against a real nats-server (the `rollout_control` bucket) and
// Postgres (audit_log), without a browser: who may, what a bad request gets, what a refusal
// changes (nothing), and that a command is the same one the CLI writes (changeRollout).
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { KV } from "@nats-io/kv";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { type Database, openDatabase } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import { newRollout, RolloutPlan } from "@pipeline/shared/rollout";
import { createRolloutStore, openControlBucket, type RolloutStore } from "@pipeline/shared/rollout/store";
import { Hono } from "hono";
import { rolloutRoutes } from "./rollout.ts";
import type { Session } from "./tokens.ts";

let nats: TestNats;
let tdb: TestDatabase;
let nc: NatsConnection;
let database: Database;
let store: RolloutStore;
let app: Hono<{ Bindings: { ip: string }; Variables: { who: Session } }>;
let invalidated = 0;

beforeAll(async () => {
  [nats, tdb] = await Promise.all([startTestNats({ regions: ["ri"] }), createTestDatabase("console_rollout")]);
  nc = await connectNats(nats.url, "console-rollout-test", nats.auth("recovery"));
  database = openDatabase(tdb.url, { max: 2 });
  app = new Hono();
  // What the console's gate sets: the session of the token in `authorization` (a name and a role).
  app.use("*", async (c, next) => {
    const [name, role] = (c.req.header("authorization") ?? "anon:viewer").split(":") as [string, "operator"];
    c.set("who", { name, role, sid: name });
    await next();
  });
  rolloutRoutes(app, {
    ctx: { nc, database } as never,
    log: createLogger("console-rollout-test", { level: "warn" }),
    invalidate: () => invalidated++,
  });
}, 60_000);
afterAll(async () => {
  await nc?.close();
  await database?.close();
  await tdb?.drop();
  await nats?.dispose();
});

const post = (verb: string, o: { who?: string; header?: boolean; body?: string } = {}) =>
  app.request(`/console/api/rollout/${verb}`, {
    method: "POST",
    headers: {
      authorization: o.who ?? "alice:operator",
      ...(o.header === false ? {} : { "x-console-action": "rollout" }),
    },
    ...(o.body !== undefined ? { body: o.body } : {}),
  });
const reason = async (r: Response) => ((await r.json()) as { reason: string }).reason;

test("with no rollout ever started (no bucket), a command is a 409 saying there is none", async () => {
  const r = await post("pause");
  expect(r.status).toBe(409);
  expect(await reason(r)).toBe("there is no rollout");
});

test("a viewer is refused (403), so is a request without the header (400), a bad verb or body (400, naming the field)", async () => {
  const kv: KV = await openControlBucket(nc);
  store = createRolloutStore(kv);
  const plan = RolloutPlan.parse({ version: "v2", stable: "v1", regions: ["ri"], steps: [5, "pause", 100], gate: {} });
  const rec = { ...newRollout(plan, new Date(), "test"), applied: true };
  expect(await store.write(rec, 0)).toBeDefined();
  const before = (await store.read())!.revision;
  expect((await post("abort", { who: "bob:viewer" })).status).toBe(403);
  expect((await post("abort", { header: false })).status).toBe(400);
  const bad = await post("frobnicate");
  expect(bad.status).toBe(400);
  expect(await reason(bad)).toBe("verb: one of pause, resume, promote, abort");
  expect(await reason(await post("pause", { body: "{not json" }))).toBe("body: not JSON");
  expect(await reason(await post("pause", { body: JSON.stringify({ id: 7 }) }))).toStartWith("id: ");
  expect(await reason(await post("pause", { body: JSON.stringify({ force: true }) }))).toStartWith("force: ");
  expect(await reason(await post("pause", { body: JSON.stringify({ full: true }) }))).toBe(
    "full: only promote takes it",
  );
  // A page showing an older rollout cannot change the current one.
  const stale = await post("abort", { body: JSON.stringify({ id: "v2-19990101000000" }) });
  expect(stale.status).toBe(409);
  expect(await reason(stale)).toBe(`the rollout is now ${rec.id}, not v2-19990101000000`);
  expect((await post("resume")).status).toBe(409);
  expect((await store.read())!.revision).toBe(before);
  const audit = await database.sql`select 1 from audit_log where action like 'rollout.%'`;
  expect(audit.length).toBe(0);
}, 30_000);

test("an operator's commands follow the CLI's rules, are written compare-and-set and audited as rollout.<verb>", async () => {
  const id = (await store.read())!.record.id;
  const p = await post("pause", { body: JSON.stringify({ id }) });
  expect(p.status).toBe(200);
  expect(await p.json()).toMatchObject({ id, state: "paused" });
  expect(await reason(await post("pause"))).toBe("already paused");
  expect((await post("resume")).status).toBe(200);
  // Not at a pause step: promote --full and promote both mean 100% in the region.
  const full = await post("promote", { body: JSON.stringify({ full: true }) });
  expect(await full.json()).toMatchObject({ state: "running", step: 2, applied: false });
  expect((await post("abort")).status).toBe(200);
  const r = (await store.read())!.record;
  expect(r).toMatchObject({ state: "aborted", reason: "aborted by console:alice" });
  expect(r.log.map((e) => e.action)).toEqual(["start", "pause", "resume", "promote", "abort"]);
  expect(await reason(await post("resume"))).toBe("the rollout is aborted");
  const audit = await database.sql<{ actor: string; action: string; detail: { full?: boolean } }[]>`
    select actor, action, detail from audit_log where action like 'rollout.%' order by id`;
  expect(audit.map((a) => `${a.actor} ${a.action}`)).toEqual([
    "console:alice rollout.pause",
    "console:alice rollout.resume",
    "console:alice rollout.promote",
    "console:alice rollout.abort",
  ]);
  expect(audit[2]!.detail.full).toBe(true);
  expect(invalidated).toBeGreaterThan(0);
}, 30_000);
